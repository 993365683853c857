"""Reading YAML with the position of every node, for errors that point at file:line:col.

Safe loading only; duplicate keys, non-string keys, tabs and aliases that would build
huge documents are refused here, before any schema sees the data.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .errors import InventoryError, Problem

FieldPath = tuple[str | int, ...]

MAX_NODES = 200_000  # a billion-laughs document stops here, not in memory


@dataclass(frozen=True)
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


class _Converter:
    def __init__(self, file: str):
        self.file = file
        self.positions: dict[FieldPath, Position] = {}
        self.problems: list[Problem] = []
        self.count = 0

    def pos(self, node: yaml.Node) -> Position:
        m = node.start_mark
        return Position(self.file, m.line + 1, m.column + 1)

    def convert(self, node: yaml.Node, path: FieldPath, depth: int = 0) -> Any:
        self.count += 1
        if node.tag not in _PLAIN_TAGS:
            p = self.pos(node)
            raise InventoryError([Problem(p.file, p.line, p.column, dotted(path),
                                          f"YAML tag {node.tag!r} is not allowed (plain data only)")])
        if self.count > MAX_NODES or depth > 64:
            p = self.pos(node)
            raise InventoryError([Problem(p.file, p.line, p.column, dotted(path),
                                          "document too large or too deeply nested (aliases?)")])
        self.positions.setdefault(path, self.pos(node))
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    p = self.pos(key_node)
                    self.problems.append(Problem(p.file, p.line, p.column, dotted(path),
                                                 "YAML merge keys (<<) are not supported; write the fields out"))
                    continue
                key = _scalar(key_node)
                if not isinstance(key, str):
                    p = self.pos(key_node)
                    self.problems.append(Problem(p.file, p.line, p.column, dotted(path),
                                                 f"key {key_node.value!r} must be a string (quote it)"))
                    continue
                if key in out:
                    p = self.pos(key_node)
                    first = self.positions[(*path, key)]
                    self.problems.append(Problem(p.file, p.line, p.column, dotted((*path, key)),
                                                 f"duplicate key (first defined at line {first.line})"))
                    continue
                self.positions[(*path, key)] = self.pos(key_node)
                out[key] = self.convert(value_node, (*path, key), depth + 1)
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.convert(v, (*path, i), depth + 1) for i, v in enumerate(node.value)]
        return _scalar(node)


_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in
               ("str", "int", "float", "bool", "null", "seq", "map", "merge")}

_constructor = yaml.SafeLoader("")


def _scalar(node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return _constructor.construct_object(node, deep=True)
    return node.value


def load_yaml_text(text: str, file: str) -> SourceDoc:
    """Parse one YAML document with positions. Raises InventoryError."""
    problems: list[Problem] = []
    for lineno, text_line in enumerate(text.splitlines(), 1):
        stripped = text_line.lstrip(" ")
        if stripped.startswith("\t"):
            problems.append(Problem(file, lineno, len(text_line) - len(stripped) + 1, "",
                                    "tab used for indentation (YAML allows spaces only)"))
    if problems:
        raise InventoryError(problems)
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        if mark is not None and mark.index >= len(text) - 1 and e.context_mark is not None:
            mark = e.context_mark  # "unexpected end": point at what was left open
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = " ".join(x for x in (e.context, e.problem) if x)
        raise InventoryError([Problem(file, line, col, "", f"YAML syntax error: {what}")]) from None
    except yaml.YAMLError as e:
        raise InventoryError([Problem(file, 1, 1, "", f"YAML error: {e}")]) from None
    if len(nodes) > 1:
        raise InventoryError([Problem(file, nodes[1].start_mark.line + 1, 1, "",
                                      "more than one YAML document in a file (remove '---')")])
    if not nodes or nodes[0] is None:
        return SourceDoc({}, {(): Position(file, 1, 1)}, (file,))
    conv = _Converter(file)
    try:
        data = conv.convert(nodes[0], ())
    except yaml.YAMLError as e:  # bad scalar, e.g. an invalid timestamp
        mark = getattr(e, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise InventoryError([Problem(file, line, col, "", f"YAML error: {getattr(e, 'problem', e)}")]) from None
    if conv.problems:
        raise InventoryError(conv.problems)
    if not isinstance(data, dict):
        p = conv.positions[()]
        raise InventoryError([Problem(file, p.line, p.column, "",
                                      f"the inventory must be a mapping, not {type(data).__name__}")])
    return SourceDoc(data, conv.positions, (file,))


def inventory_files(path: Path) -> list[Path]:
    """The YAML files of an inventory: the file itself, or *.yml/*.yaml of a directory, sorted."""
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in (".yml", ".yaml") and p.is_file())
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


def load_source(path: Path) -> SourceDoc:
    """Load a file or directory inventory into one positioned document."""
    files = inventory_files(path)
    if not files:
        raise InventoryError([Problem(str(path), 1, 1, "", "no *.yml or *.yaml files in this directory")])
    docs: list[SourceDoc] = []
    problems: list[Problem] = []
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            problems.append(Problem(str(f), 1, 1, "", f"not UTF-8 text ({e.reason})"))
            continue
        except OSError as e:
            problems.append(Problem(str(f), 1, 1, "", f"cannot read: {e.strerror}"))
            continue
        try:
            docs.append(load_yaml_text(text, str(f)))
        except InventoryError as e:
            problems.extend(e.problems)
    if problems:
        raise InventoryError(problems)
    return merge_docs(docs)
