"""Fact: the running kernel settings and the sysctl.d files that set them at boot. Pure parser.

Which file wins follows sysctl.d(5): every `*.conf` in /etc/sysctl.d, /run/sysctl.d,
/usr/local/lib/sysctl.d, /usr/lib/sysctl.d and /lib/sysctl.d, a name in an earlier directory
hiding the same name in a later one (a link to /dev/null hides it and sets nothing); all the
names then sorted lexically across directories, a later file's setting overriding an earlier
one's; /etc/sysctl.conf last (procps's `sysctl --system` reads it; Debian also links it as
/etc/sysctl.d/99-sysctl.conf, read once).
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Sequence
from dataclasses import field

from provision.frozen import frozen

from .spec import FactSpec, Rec

DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d",
        "/lib/sysctl.d")
SYSCTL_CONF = "/etc/sysctl.conf"


@frozen
class Line:
    """One setting in a sysctl.d file: `path`'s line `line` sets `key` (maybe a glob, maybe
    `-`-prefixed: errors ignored) to `value`."""

    path: str
    line: int
    key: str
    value: str

    @property
    def name(self) -> str:
        return self.key.removeprefix("-").replace("/", ".")

    def matches(self, key: str) -> bool:
        return fnmatch.fnmatchcase(key, self.name) if "*" in self.name else self.name == key

    def where(self) -> str:
        return f"{self.path}:{self.line}"


@frozen
class Kernel:
    container: str = ""  # systemd-detect-virt --container: "" when not probed, "none" on a machine
    values: dict[str, str] = field(default_factory=dict)  # sysctl -a (per-interface keys left out)
    files: tuple[str, ...] = ()  # the sysctl.d files in the order they are applied
    lines: tuple[Line, ...] = ()  # their settings, in that order

    @property
    def in_container(self) -> bool:
        return self.container not in ("", "none")

    def file_lines(self, path: str) -> tuple[Line, ...]:
        return tuple(x for x in self.lines if x.path == path)

    def after(self, path: str, key: str) -> tuple[Line, ...]:
        """Settings of `key` in files applied after `path` (they win at boot)."""
        if path in self.files:
            later = set(self.files[self.files.index(path) + 1:])
        else:  # not there yet: where it would sort
            later = {f for f in self.files if _order_key(f) > _order_key(path)}
        return tuple(x for x in self.lines if x.path in later and x.matches(key))

    def boot_value(self, key: str, without: str = "") -> Line | None:
        """The setting of `key` that wins at boot, leaving out the file `without`."""
        found = [x for x in self.lines if x.path != without and x.matches(key)]
        return found[-1] if found else None


def _order_key(path: str) -> tuple[int, str]:
    return (1, "") if path == SYSCTL_CONF else (0, posixpath.basename(path))


def applied_order(found: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The files as systemd-sysctl applies them, from (path, real path or "-" for a mask)."""
    by_name: dict[str, tuple[str, str]] = {}
    conf: tuple[str, str] | None = None
    def rank(item: tuple[str, str]) -> int:
        d = posixpath.dirname(item[0])
        return DIRS.index(d) if d in DIRS else len(DIRS)

    for path, real in sorted(found, key=rank):  # an earlier directory's name hides a later's
        if path == SYSCTL_CONF:
            conf = (path, real)
        elif posixpath.dirname(path) in DIRS:
            by_name.setdefault(posixpath.basename(path), (path, real))
    chosen = [by_name[n] for n in sorted(by_name)]
    seen: set[str] = set()
    out: list[str] = []
    for path, real in [*chosen, *([conf] if conf else [])]:
        if real == "-" or real in seen:  # masked, or read already under another name
            continue
        seen.add(real)
        out.append(path)
    return tuple(out)


def parse(records: Sequence[Rec]) -> Kernel:
    container = ""
    values: dict[str, str] = {}
    found: list[tuple[str, str]] = []
    lines: list[Line] = []
    for r in records:
        f = r.fields
        if r.kind == "kvirt":
            container = f[0]
        elif r.kind == "kval" and len(f) >= 2:
            values[f[0]] = f[1]
        elif r.kind == "kval":
            values[f[0]] = ""
        elif r.kind == "kfile" and len(f) == 2:
            found.append((f[0], f[1]))
        elif r.kind == "kconf" and len(f) >= 3 and f[1].isdigit():
            lines.append(Line(f[0], int(f[1]), f[2], f[3] if len(f) > 3 else ""))
    order = applied_order(found)
    rank = {p: i for i, p in enumerate(order)}
    kept = sorted((x for x in lines if x.path in rank), key=lambda x: (rank[x.path], x.line))
    return Kernel(container, values, order, tuple(kept))


SPEC = FactSpec("kernel", ("kvirt", "kval", "kfile", "kconf"), parse)
