"""Write one DNS record's new values back into the inventory file that declares it.

After `provision dns migrate finalize` (or `run`) moved a record with an ad hoc ``--to``,
the inventory must say so too, or the next `dns apply` would move it back. The edit
touches that record's values and nothing else: the file (of a directory inventory, the
one that declares the record, found through the loader's positions) is read with
ruamel.yaml's round-trip loader, which keeps comments, key order, quoting and flow/block
style, and written back. PyYAML (the loader provision validates with) drops comments,
so it cannot do this.

ruamel.yaml re-indents a file to one indentation (and moves comments with it) when the
file mixes several, so its output is spliced into the original: a line that differs
from the original only in spacing keeps the original's; a changed line keeps the
indentation of the line it replaces. The result is checked before it is written: parsed
again with provision's own loader it must be the same document but for that record's
values, and every line that differs must lie inside the lines the record spans.
Then the whole inventory is loaded again with the new text (a directory's other files as
they are: the same leaf declared identically in two files loads, but not once one of
them changes) and must declare the new values. Otherwise nothing is written and the
error says what to set by hand. Line endings (CRLF) are kept. The file is replaced
atomically (temp file in the same directory, fsync, rename), keeping its mode (whatever
the umask) and owner and group (the group only, when not root).

`rewrite` is pure (text in, text out); `prepare` reads the file and checks that it can
be written; `write` writes.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import ipaddress
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import ScalarString
from ruamel.yaml.util import load_yaml_guess_indent

from provision.frozen import frozen
from provision.state import fsync_dir

from .build import build
from .errors import InventoryError
from .model import Inventory, Record
from .source import dotted, load_yaml_text, merge_docs


class WriteBackError(Exception):
    """The inventory could not be updated (the message says why and what to do)."""


@frozen
class Edit:
    file: Path
    line: int                       # where the record is declared (1-based)
    old_text: str
    new_text: str
    values: tuple[str, ...]         # as written into the file

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


# (mapping, sequence, offset) indents tried after the one guessed from the file
_INDENTS = ((2, 2, 0), (2, 4, 2), (4, 4, 2), (4, 4, 0), (4, 6, 4))


def _find(mapping: Any, key: str, norm: Any = str.lower) -> Any:
    for k in mapping:
        if isinstance(k, str) and norm(k) == norm(key):
            return k
    return None


def _path(data: Any, zone: str, name: str, rtype: str) -> tuple[str | int, ...]:
    """The field path of record `name` (relative, as in the inventory) of type `rtype`."""
    def zone_norm(z: str) -> str:
        return z.rstrip(".").lower()

    zones = ((data or {}).get("dns") or {}).get("zones") or {}
    zk = _find(zones, zone, zone_norm)
    records = (zones.get(zk) or {}).get("records") if zk is not None else None
    rk = _find(records, name) if records else None
    if rk is None or records is None:
        raise WriteBackError(f"record {name} of zone {zone} is not declared in this file")
    entry = records[rk]
    if isinstance(entry, list):
        for i, r in enumerate(entry):
            if isinstance(r, dict) and r.get("type") == rtype:
                return ("dns", "zones", zk, "records", rk, i)
        raise WriteBackError(f"record {name} of zone {zone} has no {rtype} entry in this file")
    if not isinstance(entry, dict) or entry.get("type") != rtype:
        raise WriteBackError(f"record {name} of zone {zone} is not a {rtype} record in this file")
    return ("dns", "zones", zk, "records", rk)


def _get(data: Any, path: tuple[str | int, ...]) -> Any:
    for p in path:
        data = data[p]
    return data


def _styled(old: Any, new: str) -> Any:
    """`new` in the quoting style of `old` (a ruamel scalar string keeps its quotes)."""
    return type(old)(new) if isinstance(old, ScalarString) else new


def _as_written(rtype: str, old: Any, value: str) -> str:
    # CNAME targets are kept absolute in the journal; keep the file's own spelling
    if rtype == "CNAME" and isinstance(old, str) and not old.endswith("."):
        return value.rstrip(".")
    return value


def rewrite(text: str, file: str, zone: str, name: str, rtype: str,
            values: tuple[str, ...]) -> tuple[str, int, tuple[str, ...]]:
    """The file's text with record `name`'s values replaced by `values`: (new text, the
    line the record is declared on, the values as written). Raises WriteBackError."""
    try:
        before = load_yaml_text(text, file)
    except InventoryError as e:
        raise WriteBackError(f"{file} does not load: {e}") from None
    path = _path(before.data, zone, name, rtype)
    lines = [pos.line for p, pos in before.positions.items() if p[: len(path)] == path]
    line, last = min(lines), max(lines)
    try:
        _, ind, bsi = load_yaml_guess_indent(text)
    except YAMLError as e:
        raise WriteBackError(f"{file}: ruamel.yaml cannot read it ({e})") from None
    guessed = (bsi or 2, ind or 2, bsi or 0) if ind else _INDENTS[0]
    written: tuple[str, ...] = ()
    for mapping, sequence, offset in (guessed, *_INDENTS):
        y = YAML(typ="rt")
        y.preserve_quotes = True
        y.width = 4096                      # never fold a long line that was not folded
        y.indent(mapping=mapping, sequence=sequence, offset=offset)
        y.explicit_start = text.lstrip().startswith("---")
        try:
            doc = y.load(text)
            rec = _get(doc, path)
            if rtype == "CNAME":
                rec["value"] = _styled(rec["value"], _as_written(rtype, rec["value"], values[0]))
                written = (str(rec["value"]),)
            else:
                seq = rec["values"]
                style = seq[0] if len(seq) else None
                # a value kept stays where it is, with its comment; one that goes takes
                # its comment with it; new ones are added at the end. One value for one
                # (a cutover: `- OLD  # note` becomes `- NEW  # note`) is the same line
                # changed, comment kept, as a flow list's `[OLD]  # note` is
                present = {str(v) for v in seq}
                added = [v for v in values if v not in present]
                gone = [i for i in range(len(seq)) if str(seq[i]) not in values]
                if len(gone) == 1 and len(added) == 1:
                    seq[gone[0]] = _styled(seq[gone[0]], added.pop())
                for i in reversed(range(len(seq))):
                    if str(seq[i]) not in values:
                        del seq[i]
                for v in added:
                    seq.append(_styled(style, v))
                written = tuple(str(v) for v in seq)
            out = io.StringIO()
            y.dump(doc, out)
        except (YAMLError, KeyError, TypeError, IndexError):
            continue
        new = _splice_record(text, out.getvalue(), file, path, line, last)
        if new is not None and _only_the_record(text, new, file, before.data, path, rtype, written, line, last):
            return new, line, written
    raise WriteBackError(f"{file}:{line}: cannot rewrite the file without changing other lines "
                         "(a layout ruamel.yaml does not keep, or a record shared through a YAML alias): set the record's "
                         f"{'value' if rtype == 'CNAME' else 'values'} to "
                         f"{', '.join(values)} by hand")


def _span(text: str, file: str, path: tuple[str | int, ...]) -> tuple[int, int] | None:
    """The first and last line (1-based) of the record at `path` in `text`."""
    try:
        doc = load_yaml_text(text, file)
    except InventoryError:
        return None
    lines = [pos.line for p, pos in doc.positions.items() if p[: len(path)] == path]
    return (min(lines), max(lines)) if lines else None


def _splice_record(old: str, new: str, file: str, path: tuple[str | int, ...], line: int,
                   last: int) -> str | None:
    """The original text with only the record's lines replaced by ruamel.yaml's (itself
    spliced line by line): whatever ruamel.yaml re-wrapped or re-indented elsewhere is
    not taken."""
    span = _span(new, file, path)
    if span is None:
        return None
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    record = _splice("".join(a[line - 1:last]), "".join(b[span[0] - 1:span[1]]))
    if a[last - 1:last] and a[last - 1].endswith("\n") and not record.endswith("\n"):
        record += "\n"
    elif a[last - 1:last] and not a[last - 1].endswith("\n") and record.endswith("\n"):
        record = record[:-1]  # the file's last line had no newline: it still has none
    return "".join(a[:line - 1]) + record + "".join(a[last:])


def _splice(old: str, new: str) -> str:
    """`new`, with every line that differs from `old` only in spacing taken from `old`,
    and each changed line indented like the line it replaces (or the one before it)."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)

    def norm(s: str) -> str:
        return " ".join(s.split())

    sm = difflib.SequenceMatcher(a=[norm(x) for x in a], b=[norm(x) for x in b],
                                 autojunk=False)
    out: list[str] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            out += a[i1:i2]
            continue
        olds = a[i1:i2]
        for k, line in enumerate(b[j1:j2]):
            ref = olds[k] if k < len(olds) else (out[-1] if out else line)
            line = ref[: len(ref) - len(ref.lstrip(" "))] + line.lstrip(" ")
            out.append(_comment_gap(olds[k], line) if k < len(olds) else line)
    return "".join(out)


def _comment_gap(old: str, new: str) -> str:
    """`new` with the spaces before its trailing comment as `old` had them (ruamel.yaml
    moves a comment by the change in length of what precedes it, or more)."""
    i = old.rfind("#")
    if i <= 0 or not old[i - 1].isspace():
        return new
    comment = old[i:].rstrip("\n")
    end = "\n" if new.endswith("\n") else ""
    body = new.rstrip("\n")
    if not body.endswith(comment):
        return new
    code = old[:i].rstrip()
    return body[: len(body) - len(comment)].rstrip() + old[len(code):i] + comment + end


def _only_the_record(old: str, new: str, file: str, data: Any, path: tuple[str | int, ...],
                     rtype: str, written: tuple[str, ...], line: int, last: int) -> bool:
    """`new` is `old` with only the record's values changed: the same document otherwise,
    and no line outside the record's lines [line, last] touched."""
    try:
        after = load_yaml_text(new, file)
    except InventoryError:
        return False
    # through JSON, not deepcopy: an anchored record shared by an alias must come out as
    # two records, so that changing both (what the YAML would do) is caught
    expect = json.loads(json.dumps(data))
    rec = _get(expect, path)
    if rtype == "CNAME":
        rec["value"] = written[0]
    else:
        rec["values"] = list(written)
    if after.data != expect:
        return False
    sm = difflib.SequenceMatcher(a=old.splitlines(keepends=True),
                                 b=new.splitlines(keepends=True), autojunk=False)
    for op, i1, i2, _, _ in sm.get_opcodes():
        if op == "equal":
            continue
        lo, hi = line - 1, last            # 0-based: lines[lo:hi] are the record's
        if i1 == i2:
            if not lo <= i1 <= hi:
                return False
        elif not (lo <= i1 and i2 <= hi):
            return False
    return True


def declared_in(inv: Inventory, zone: str, name: str) -> str | None:
    """The file that declares record `name` (relative) of `zone`, from the positions the
    loader kept (the right file of a directory inventory)."""
    for key, (file, _line, _col) in inv.positions.items():
        for zkey in (zone, zone + "."):
            if key.lower() in (dotted(("dns", "zones", zkey, "records", name)),
                               dotted(("dns", "zones", zkey, "records", name)) + "[0]"):
                return file
    return None


def prepare(inv: Inventory, zone: str, name: str, rtype: str, values: tuple[str, ...]) -> Edit:
    """The edit that writes `values` into the record's file, checked: the file is read,
    rewritten in memory, the whole inventory reloaded with it (a directory's other files
    as they are) and found to declare `values` for the record, and the file found
    writable. Nothing is written. Raises WriteBackError.

    The file must still declare what `inv` (loaded when the command started) does for the
    record: an edit made meanwhile (while `run` waited) is never overwritten."""
    generated = _record_of(inv, zone, name, rtype)
    if generated is not None and generated.host is not None:
        raise WriteBackError(f"record {name} of zone {zone} is made by the zone's from_hosts "
                             f"from host {generated.host}'s address: set hosts."
                             f"{generated.host}.address to {', '.join(values)} instead")
    file = declared_in(inv, zone, name)
    if file is None:
        raise WriteBackError(f"record {name} of zone {zone} is not declared in the inventory "
                             f"{inv.source}")
    p = Path(os.path.realpath(file))
    try:
        raw = p.read_bytes().decode("utf-8")   # line endings as they are
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8"
        raise WriteBackError(f"{file}: cannot read it: {why}") from None
    text = raw.replace("\r\n", "\n")
    crlf = text != raw
    if "\r" in text or (crlf and raw.count("\n") != raw.count("\r\n")):
        raise WriteBackError(f"{file}: mixed line endings (CRLF and LF, or a lone CR): set the "
                             f"record's values to {', '.join(values)} by hand")
    if rtype in ("A", "AAAA"):  # in address order (10.0.0.9 before 10.0.0.10)
        values = tuple(sorted(values, key=ipaddress.ip_address))
    then = _record_of(inv, zone, name, rtype)
    now = _record_of(_load_with(inv, p, raw, file), zone, name, rtype)
    if then is None or now is None or now.values != then.values:
        raise WriteBackError(f"{file}: the record's values there are now "
                             f"{', '.join(now.values) if now else '(none)'}, not "
                             f"{', '.join(then.values) if then else '(none)'} as when this "
                             "command loaded the inventory (edited meanwhile): not overwritten")
    new, line, written = rewrite(text, file, zone, name, rtype, values)
    if crlf:
        new = new.replace("\n", "\r\n")
    after = _record_of(_load_with(inv, p, new, f"{file}:{line}"), zone, name, rtype)
    if after is None or _norm(rtype, after.values) != _norm(rtype, written):
        raise WriteBackError(f"{file}:{line}: rewritten, the inventory would declare "
                             f"{', '.join(after.values) if after else 'no such record'} for "
                             f"{name} {rtype}: not written; set it by hand")
    if not os.access(p, os.W_OK) or not os.access(p.parent, os.W_OK | os.X_OK):
        raise WriteBackError(f"{file}:{line}: the file cannot be written (permissions, a "
                             "read-only file system or an immutable file)")
    return Edit(p, line, raw, new, written)


def _norm(rtype: str, values: tuple[str, ...]) -> set[str]:
    """Values as the loader compares them (a CNAME target's case and final dot aside)."""
    return {v.lower().rstrip(".") for v in values} if rtype == "CNAME" else set(values)


def _record_of(inv: Inventory, zone: str, name: str, rtype: str) -> Record | None:
    z = next((z for z in (inv.dns.zones if inv.dns else ())
              if z.name.rstrip(".").lower() == zone.rstrip(".").lower()), None)
    return next((r for r in (z.records if z else ()) if r.name.lower() == name.lower()
                 and r.type == rtype), None)


def _files(inv: Inventory, file: Path) -> list[Path]:
    """The files `inv` was loaded from: `source` joins them with commas (a name with a
    comma in it: the files its positions name, which may miss one declaring nothing new)."""
    parts = [Path(f) for f in inv.source.split(",")]
    if all(f.is_file() for f in parts):
        return parts
    return sorted({Path(f) for f, _, _ in inv.positions.values()} | {file})


def _load_with(inv: Inventory, file: Path, text: str, where: str) -> Inventory:
    """The inventory `inv` was loaded from, with `file`'s text replaced by `text` (the
    other files of a directory as they are on disk). Raises WriteBackError."""
    try:
        docs = []
        for f in _files(inv, file):
            t = text if Path(os.path.realpath(f)) == file else f.read_text(encoding="utf-8")
            docs.append(load_yaml_text(t, str(f)))
        return build(merge_docs(docs))
    except InventoryError as e:
        first = e.problems[0] if e.problems else None
        why = f"{first.file}:{first.line}: {first.message}" if first else str(e)
        raise WriteBackError(f"{where}: with the new values the inventory does not load "
                             f"({why}); not written: set the values by hand") from None
    except (OSError, UnicodeDecodeError) as e:
        raise WriteBackError(f"{where}: the inventory cannot be read again ({e})") from None


def _keep_owner(fd: int, st: os.stat_result) -> None:
    """The new file gets the old one's owner and group (as root), else its group when
    this user may set it (a member of it); otherwise the file becomes this user's."""
    try:
        os.fchown(fd, st.st_uid, st.st_gid)
    except PermissionError:
        with contextlib.suppress(PermissionError):
            os.fchown(fd, -1, st.st_gid)


def write(edit: Edit) -> None:
    """Replace the file atomically, if it still holds what `prepare` read."""
    p = edit.file
    try:
        if p.read_bytes() != edit.old_text.encode("utf-8"):
            raise WriteBackError(f"{edit.where}: the file changed since it was read; not "
                                 f"written: set the values to {', '.join(edit.values)} by hand")
        st = p.stat()
        fd, name = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
        tmp = Path(name)
        try:
            try:
                data = edit.new_text.encode("utf-8")
                while data:
                    data = data[os.write(fd, data):]
                os.fchmod(fd, st.st_mode & 0o7777)   # not cut by the umask
                _keep_owner(fd, st)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, p)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        fsync_dir(p.parent)
    except OSError as e:
        raise WriteBackError(f"{edit.where}: not written: {e.strerror}") from None
