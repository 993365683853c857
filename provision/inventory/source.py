"""Reading YAML with the position of every node, for errors that point at file:line:col.

Safe loading only; duplicate keys, non-string keys, tabs and aliases that would build
huge documents are refused here, before any schema sees the data.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from provision.frozen import frozen
from provision.localfile import read_regular
from provision.text import printable, unsafe

from .errors import InventoryError, Problem

FieldPath = tuple[str | int, ...]

MAX_NODES = 200_000  # a billion-laughs document stops here, not in memory


@frozen
class Position:
    file: str
    line: int
    column: int


@dataclass
class SourceDoc:
    """Plain data loaded from YAML plus the position of each field path."""

    data: Any
    positions: dict[FieldPath, Position]
    files: tuple[str, ...]
    # the inventory's name: a file's stem, a directory's name (the default dns.owner)
    name: str = ""
    # the inventory's own tree (`tree_of`); "" for text that is not from a file
    tree: str = ""

    def where(self, path: Iterable[str | int]) -> Position:
        """Position of the deepest known prefix of `path`."""
        p = tuple(path)
        while p:
            if p in self.positions:
                return self.positions[p]
            p = p[:-1]
        return self.positions.get((), Position(self.files[0] if self.files else "<inventory>", 1, 1))


def dotted(path: Iterable[str | int]) -> str:
    """hosts.gpu1.services[0] style rendering of a field path."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in
               ("str", "int", "float", "bool", "null", "seq", "map", "merge")}
_STR = "tag:yaml.org,2002:str"
MAX_DEPTH = 64
MAX_FILE_BYTES = 4 * 1024 * 1024  # a 10,000-host inventory is about 1 MB
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser keeps marks too
_resolver = yaml.resolver.Resolver()
_constructor = yaml.SafeLoader("")


class _Frame:
    """A mapping or sequence being built from events."""

    __slots__ = ("event", "key", "key_event", "path", "start", "value")

    def __init__(self, value: Any, path: FieldPath, event: Any, start: int):
        self.value = value
        self.path = path
        self.event = event  # the start event (position, anchor)
        self.start = start  # values counted before it (its expanded size for aliases)
        self.key: Any = _NO_KEY
        self.key_event: Any = None


_NO_KEY = object()


class _Builder:
    """Plain data and positions straight from libyaml's event stream: no yaml.Node objects
    (composing nodes costs ten times the parse), every limit checked as events arrive."""

    def __init__(self, file: str):
        self.file = file
        self.positions: dict[FieldPath, Position] = {}
        self.problems: list[Problem] = []
        self.count = 0
        self.anchors: dict[str, tuple[Any, int]] = {}  # anchor -> (value, expanded size)

    def pos(self, event: Any) -> Position:
        m = event.start_mark
        return Position(self.file, m.line + 1, m.column + 1)

    def fail(self, event: Any, path: FieldPath, message: str) -> InventoryError:
        p = self.pos(event)
        return InventoryError([Problem(p.file, p.line, p.column, dotted(path), message)])

    def _tick(self, event: Any, path: FieldPath, n: int = 1) -> None:
        self.count += n
        if self.count > MAX_NODES:
            raise self.fail(event, path, f"document too large (more than {MAX_NODES:,} values, "
                                         "counting what aliases repeat)")

    def _scalar(self, event: Any, path: FieldPath) -> Any:
        tag = event.tag
        if tag is None or tag == "!":
            # types-PyYAML leaves Resolver.resolve untyped
            tag = _resolver.resolve(yaml.ScalarNode, event.value, event.implicit)  # type: ignore[no-untyped-call]
        if tag not in _PLAIN_TAGS:
            raise self.fail(event, path, f"YAML tag {tag!r} is not allowed (plain data only)")
        if tag == _STR:  # most values: no constructor needed
            return event.value
        if tag == "tag:yaml.org,2002:merge":
            return _MERGE
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        return _constructor.construct_object(node, deep=True)

    def build(self, events: Any) -> Any:
        stack: list[_Frame] = []
        root: Any = None
        have_root = second_document = False

        def place(value: Any, event: Any, size: int) -> None:
            nonlocal root, have_root
            anchor = getattr(event, "anchor", None)
            if anchor:
                self.anchors[anchor] = (value, size)
            if not stack:
                root, have_root = value, True
                return
            top = stack[-1]
            if isinstance(top.value, list):
                top.value.append(value)
                return
            if top.key is _NO_KEY:  # this value is a key
                top.key, top.key_event = value, event
                return
            key, key_event = top.key, top.key_event
            top.key = _NO_KEY
            if key is _MERGE:
                p = self.pos(key_event)
                self.problems.append(Problem(p.file, p.line, p.column, dotted(top.path),
                                             "YAML merge keys (<<) are not supported; write the fields out"))
            elif not isinstance(key, str):
                p = self.pos(key_event)
                self.problems.append(Problem(p.file, p.line, p.column, dotted(top.path),
                                             f"key {printable(str(getattr(key_event, 'value', key)))!r} "
                                             "must be a string (quote it)"))
            elif key in top.value:
                p = self.pos(key_event)
                first = self.positions[(*top.path, key)]
                self.problems.append(Problem(p.file, p.line, p.column, dotted((*top.path, key)),
                                             f"duplicate key (first defined at line {first.line})"))
            else:
                top.value[key] = value

        def child_path() -> FieldPath:
            if not stack:
                return ()
            top = stack[-1]
            if isinstance(top.value, list):
                return (*top.path, len(top.value))
            if top.key is _NO_KEY:
                return top.path  # a key: positioned with its mapping until we know its text
            return (*top.path, top.key) if isinstance(top.key, str) else top.path

        for event in events:
            if isinstance(event, yaml.StreamStartEvent | yaml.StreamEndEvent | yaml.DocumentEndEvent):
                continue
            if isinstance(event, yaml.DocumentStartEvent):
                second_document = have_root
                continue
            if second_document:  # point at what the second document holds
                raise self.fail(event, (), "more than one YAML document in a file (remove '---')")
            path = child_path()
            is_key = bool(stack) and isinstance(stack[-1].value, dict) and stack[-1].key is _NO_KEY
            if isinstance(event, yaml.AliasEvent):
                if event.anchor not in self.anchors:
                    raise self.fail(event, path, f"unknown alias *{event.anchor}")
                value, size = self.anchors[event.anchor]
                self._tick(event, path, size)
                place(value, event, size)
                continue
            if isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                frame = stack.pop()
                place(frame.value, frame.event, self.count - frame.start)
                continue
            self._tick(event, path)
            if is_key and isinstance(event, yaml.ScalarEvent):
                value = self._scalar(event, path)
                if isinstance(value, str):
                    self.positions[(*path, value)] = self.pos(event)
                place(value, event, 1)
                continue
            if is_key:
                raise self.fail(event, path, "a key must be a plain string, not a mapping or list")
            self.positions.setdefault(path, self.pos(event))
            if isinstance(event, yaml.ScalarEvent):
                place(self._scalar(event, path), event, 1)
            elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                if event.tag is not None and event.tag not in _PLAIN_TAGS:
                    raise self.fail(event, path, f"YAML tag {event.tag!r} is not allowed (plain data only)")
                if len(stack) >= MAX_DEPTH:
                    raise self.fail(event, path, f"document nested too deeply (more than {MAX_DEPTH} levels)")
                stack.append(_Frame({} if isinstance(event, yaml.MappingStartEvent) else [],
                                    path, event, self.count))
        return root if have_root else None


_MERGE = object()


def load_yaml_text(text: str, file: str) -> SourceDoc:
    """Parse one YAML document with positions. Raises InventoryError."""
    size = len(text.encode("utf-8", errors="surrogateescape"))
    if size > MAX_FILE_BYTES:
        raise InventoryError([Problem(file, 1, 1, "", f"file too large ({size:,} bytes; at most "
                                      f"{MAX_FILE_BYTES:,}): split the inventory into a directory "
                                      "of files")])
    problems: list[Problem] = []
    for lineno, text_line in enumerate(text.split("\n"), 1):
        stripped = text_line.lstrip(" ")
        if stripped.startswith("\t"):
            problems.append(Problem(file, lineno, len(text_line) - len(stripped) + 1, "",
                                    "tab used for indentation (YAML allows spaces only)"))
        # NEL, line/paragraph separators, bidi overrides: YAML folds or keeps them, and a
        # reviewer does not see what the file says (write them as escapes if ever needed)
        bad = unsafe(text_line.replace("\t", " ").rstrip("\r"))
        if bad:
            problems.append(Problem(file, lineno, text_line.index(bad) + 1, "",
                                    f"character {printable(bad)!r} is not allowed in an inventory "
                                    "file (it changes how lines or text read)"))
    if problems:
        raise InventoryError(problems)
    builder = _Builder(file)
    try:
        data = builder.build(yaml.parse(text, Loader=_Loader))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        if mark is not None and mark.index >= len(text) - 1 and e.context_mark is not None:
            mark = e.context_mark  # "unexpected end": point at what was left open
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = " ".join(x for x in (e.context, e.problem) if x)
        raise InventoryError([Problem(file, line, col, "", f"YAML syntax error: {what}")]) from None
    except yaml.reader.ReaderError as e:  # a character YAML refuses: locate it by its index
        before = text[: max(0, e.position)]
        line, col = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
        raise InventoryError([Problem(file, line, col, "", f"YAML error: character "
                                      f"{printable(chr(e.character)) if isinstance(e.character, int) else printable(str(e.character))!r} "
                                      f"is not allowed ({e.reason})")]) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise InventoryError([Problem(file, line, col, "", f"YAML error: {getattr(e, 'problem', e)}")]) from None
    except RecursionError:
        raise InventoryError([Problem(file, 1, 1, "", "document nested too deeply")]) from None
    if builder.problems:
        raise InventoryError(builder.problems)
    if data is None:
        return SourceDoc({}, {(): Position(file, 1, 1)}, (file,))
    if not isinstance(data, dict):
        p = builder.positions.get((), Position(file, 1, 1))
        raise InventoryError([Problem(file, p.line, p.column, "",
                                      f"the inventory must be a mapping, not {type(data).__name__}")])
    return SourceDoc(data, builder.positions, (file,))


def inventory_files(path: Path) -> list[Path]:
    """The YAML files of an inventory: the file itself, or *.yml/*.yaml of a directory, sorted."""
    if path.is_dir():
        # not only regular files: a FIFO or device named *.yml is refused when read, not
        # silently left out of the inventory
        return sorted(p for p in path.iterdir() if p.suffix in (".yml", ".yaml"))
    return [path]


def merge_docs(docs: list[SourceDoc]) -> SourceDoc:
    """Merge several files into one document; the same leaf defined twice is an error."""
    if len(docs) == 1:
        return docs[0]
    data: dict[str, Any] = {}
    positions: dict[FieldPath, Position] = {}
    problems: list[Problem] = []

    def merge(dst: dict[str, Any], src: dict[str, Any], path: FieldPath, doc: SourceDoc) -> None:
        for key, value in src.items():
            sub = (*path, key)
            if key not in dst:
                dst[key] = value
                for p, pos in doc.positions.items():
                    if p[: len(sub)] == sub:
                        positions.setdefault(p, pos)
            elif isinstance(dst[key], dict) and isinstance(value, dict):
                merge(dst[key], value, sub, doc)
            elif dst[key] != value:
                here, there = doc.where(sub), positions.get(sub)
                first = f"{there.file}:{there.line}" if there else "another file"
                problems.append(Problem(here.file, here.line, here.column, dotted(sub),
                                        f"defined differently in {first}; define it in one file"))

    for doc in docs:
        positions.setdefault((), doc.positions.get((), Position(doc.files[0], 1, 1)))
        merge(data, doc.data, (), doc)
    if problems:
        raise InventoryError(problems)
    return SourceDoc(data, positions, tuple(f for d in docs for f in d.files))


def tree_of(path: str | os.PathLike[str]) -> Path:
    """The inventory's own directory tree: the directory itself, or the file's directory,
    after every symbolic link is resolved. A symlinked inventory file's tree is where its
    target lies, not where the link is: what is trusted as the inventory's (task code, key
    files) is decided by where the inventory really is, not by how it was named."""
    real = Path(os.path.realpath(path))
    return real if real.is_dir() else real.parent


def load_source(path: Path) -> SourceDoc:
    """Load a file or directory inventory into one positioned document."""
    files = inventory_files(path)
    bad = [f for f in files if printable(f.name) != f.name]
    if bad:  # located at the directory: the name itself is what cannot be shown as it is
        raise InventoryError([Problem(f"{path}/", 1, 1, "", f"the file name {printable(f.name)!r} "
                                      "contains control characters or newlines; rename it")
                              for f in bad])
    if not files:
        raise InventoryError([Problem(str(path), 1, 1, "", "no *.yml or *.yaml files in this directory")])
    docs: list[SourceDoc] = []
    problems: list[Problem] = []
    for f in files:
        try:
            # a regular file (a FIFO or /dev/zero would hang the read), of bounded size
            data = read_regular(f, MAX_FILE_BYTES, "inventory file", follow=True)
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            before = data[: e.start]
            problems.append(Problem(str(f), before.count(b"\n") + 1,
                                    e.start - (before.rfind(b"\n") + 1) + 1, "",
                                    f"not UTF-8 text (byte 0x{data[e.start]:02x}; an "
                                    "inventory is UTF-8)"))
            continue
        except OSError as e:
            problems.append(Problem(str(f), 1, 1, "", f"cannot read: {e.strerror or e}"))
            continue
        try:
            docs.append(load_yaml_text(text, str(f)))
        except InventoryError as e:
            problems.extend(e.problems)
    if problems:
        raise InventoryError(problems)
    merged = merge_docs(docs)
    # the name, not the absolute path: one inventory has one name on every machine
    merged.name = Path(os.path.abspath(path)).name if path.is_dir() else path.stem
    merged.tree = str(tree_of(path))
    return merged
