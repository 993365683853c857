"""Fact: files, directories and leftover temp files (`F:`, `D:`, `L:` arguments). Pure parser."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from dataclasses import field

from provision.frozen import frozen

from .spec import FactsError, FactSpec, Rec, as_int

TEMP_PREFIX = ".provision-tmp."


@frozen
class FileFact:
    path: str
    kind: str  # "file", "absent", "other" (a directory, symlink, device...)
    sha256: str = ""
    mode: int = 0
    owner: str = ""
    group: str = ""
    mtime: int = 0
    content: str | None = None  # None when too large or not a file

    @property
    def exists(self) -> bool:
        return self.kind != "absent"


@frozen
class DirFact:
    path: str
    kind: str  # "dir", "absent", "other"
    mode: int = 0
    owner: str = ""
    group: str = ""


@frozen
class Files:
    files: dict[str, FileFact] = field(default_factory=dict)
    dirs: dict[str, DirFact] = field(default_factory=dict)
    temps: tuple[str, ...] = ()


def _mode(value: str, rec: Rec) -> int:
    try:
        return int(value, 8)
    except ValueError:
        raise FactsError(f"line {rec.line}: bad mode {value!r}") from None


def _content(b64: str, rec: Rec) -> str | None:
    if b64 == "-":
        return None
    if b64 == ".":
        return ""
    try:
        return base64.b64decode(b64, validate=True).decode("utf-8", errors="surrogateescape")
    except (binascii.Error, ValueError):
        raise FactsError(f"line {rec.line}: bad file content encoding") from None


def _sha256(field: str, content: str | None, rec: Rec) -> str:
    """The host sends `=` instead of a digest when it sends the content: one `sha256sum`
    process fewer per file on every host of a run, and the digest of the same bytes."""
    if field != "=":
        return field
    if content is None:
        raise FactsError(f"line {rec.line}: file record without digest or content")
    return hashlib.sha256(content.encode("utf-8", errors="surrogateescape")).hexdigest()


def parse(records: Sequence[Rec]) -> Files:
    files: dict[str, FileFact] = {}
    dirs: dict[str, DirFact] = {}
    temps: list[str] = []
    for r in records:
        f = r.fields
        if r.kind == "file":
            if len(f) == 2 and f[1] in ("absent", "notfile"):
                files[f[0]] = FileFact(f[0], "absent" if f[1] == "absent" else "other")
            elif len(f) == 7:
                content = _content(f[6], r)
                files[f[0]] = FileFact(f[0], "file", _sha256(f[1], content, r), _mode(f[2], r),
                                       f[3], f[4], as_int(f[5], r, "mtime"), content)
            else:
                raise FactsError(f"line {r.line}: malformed file record")
        elif r.kind == "dir":
            if len(f) == 2 and f[1] in ("absent", "notdir"):
                dirs[f[0]] = DirFact(f[0], "absent" if f[1] == "absent" else "other")
            elif len(f) == 4:
                dirs[f[0]] = DirFact(f[0], "dir", _mode(f[1], r), f[2], f[3])
            else:
                raise FactsError(f"line {r.line}: malformed dir record")
        elif r.kind == "tmp" and f[0] not in temps:
            temps.append(f[0])
    return Files(files, dirs, tuple(temps))


SPEC = FactSpec("files", ("file", "dir", "tmp"), parse)
