"""Facts about a host: the probe request (what to ask) and the parser of its answer.

Pure: the probe script itself is `templates/facts-probe.sh`; it runs over SSH in the
shell layer (`provision.hosts.session`). Here we only build its arguments and parse its
tab-separated records into immutable data.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from importlib.resources import files

TEMP_PREFIX = ".provision-tmp."
MARKER = "# Managed by provision"  # first line of every authorized_keys we write


class FactsError(Exception):
    """The probe's answer could not be understood."""


@dataclass(frozen=True)
class Request:
    """What the steps want to know. Order is kept; duplicates are dropped when merged."""

    files: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()  # list files whose path starts with this
    users: tuple[str, ...] = ()
    units: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()

    def merge(self, other: Request) -> Request:
        def m(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(dict.fromkeys((*a, *b)))
        return Request(m(self.files, other.files), m(self.dirs, other.dirs),
                       m(self.prefixes, other.prefixes), m(self.users, other.users),
                       m(self.units, other.units), m(self.packages, other.packages))

    def args(self) -> list[str]:
        return ([f"F:{p}" for p in self.files] + [f"D:{p}" for p in self.dirs]
                + [f"L:{p}" for p in self.prefixes] + [f"U:{u}" for u in self.users]
                + [f"S:{u}" for u in self.units] + [f"P:{p}" for p in self.packages])


def probe_script() -> str:
    return (files("provision._templates") / "facts-probe.sh").read_text()


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class DirFact:
    path: str
    kind: str  # "dir", "absent", "other"
    mode: int = 0
    owner: str = ""
    group: str = ""


@dataclass(frozen=True)
class UserFact:
    name: str
    uid: int
    group: str
    home: str
    shell: str
    expire: str  # shadow field 8, "" when unset
    groups: tuple[str, ...]

    @property
    def expired(self) -> bool:
        return self.expire not in ("", "-")


@dataclass(frozen=True)
class UnitFact:
    name: str
    load_state: str
    unit_file_state: str
    active_state: str
    need_daemon_reload: bool
    active_since: int | None  # unix seconds, when systemd can say

    @property
    def enabled(self) -> bool:
        return self.unit_file_state in ("enabled", "enabled-runtime", "static", "alias")

    @property
    def active(self) -> bool:
        return self.active_state in ("active", "activating", "reloading")


@dataclass(frozen=True)
class PackageFact:
    name: str
    status: str
    version: str

    @property
    def installed(self) -> bool:
        return self.status.endswith(" installed") and not self.status.startswith("deinstall")


@dataclass(frozen=True)
class Socket:
    address: str
    port: int
    process: str


@dataclass(frozen=True)
class Gpu:
    name: str
    driver: str
    memory: str


@dataclass(frozen=True)
class Facts:
    uid: int
    files: dict[str, FileFact] = field(default_factory=dict)
    dirs: dict[str, DirFact] = field(default_factory=dict)
    users: dict[str, UserFact] = field(default_factory=dict)
    absent_users: frozenset[str] = frozenset()
    managed_users: tuple[str, ...] = ()  # accounts whose authorized_keys carries our marker
    units: dict[str, UnitFact] = field(default_factory=dict)
    packages: dict[str, PackageFact] = field(default_factory=dict)
    os: dict[str, str] = field(default_factory=dict)
    docker: bool = False
    gpus: tuple[Gpu, ...] = ()
    listening: tuple[Socket, ...] = ()
    temps: tuple[str, ...] = ()
    has: frozenset[str] = frozenset()

    def file(self, path: str) -> FileFact:
        return self.files.get(path, FileFact(path, "absent"))

    def dir(self, path: str) -> DirFact:
        return self.dirs.get(path, DirFact(path, "absent"))

    def prefixed(self, prefix: str) -> tuple[FileFact, ...]:
        return tuple(f for p, f in sorted(self.files.items()) if p.startswith(prefix) and f.exists)


def _int(value: str, line: int, what: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise FactsError(f"line {line}: bad {what} {value!r}") from None


def _mode(value: str, line: int) -> int:
    try:
        return int(value, 8)
    except ValueError:
        raise FactsError(f"line {line}: bad mode {value!r}") from None


def _content(b64: str, line: int) -> str | None:
    if b64 == "-":
        return None
    if b64 == ".":
        return ""
    try:
        return base64.b64decode(b64, validate=True).decode("utf-8", errors="surrogateescape")
    except (binascii.Error, ValueError):
        raise FactsError(f"line {line}: bad file content encoding") from None


def _socket(line: str) -> Socket | None:
    # LISTEN 0 4096 127.0.0.1:8888 0.0.0.0:* users:(("python3",pid=12,fd=3))
    parts = line.split()
    if len(parts) < 4:
        return None
    local = parts[3]
    addr, _, port = local.rpartition(":")
    if not port.isdigit():
        return None
    addr = addr.strip("[]")
    if "%" in addr:
        addr = addr.split("%", 1)[0]
    proc = ""
    for p in parts[5:]:
        if p.startswith("users:((\""):
            proc = p[len("users:((\""):].split("\"", 1)[0]
    return Socket(addr, int(port), proc)


def parse(text: str) -> Facts:
    """Parse the probe's output. Raises FactsError when it is truncated or malformed."""
    lines = text.split("\n")
    if not lines or lines[0] != "probe\t1":
        raise FactsError("not a provision probe answer (first line should be 'probe\\t1')")
    uid = -1
    files_: dict[str, FileFact] = {}
    dirs: dict[str, DirFact] = {}
    users: dict[str, UserFact] = {}
    absent: set[str] = set()
    managed: list[str] = []
    unit_lines: list[str] = []
    pkgs: dict[str, PackageFact] = {}
    os_: dict[str, str] = {}
    docker = False
    gpus: list[Gpu] = []
    socks: list[Socket] = []
    temps: list[str] = []
    has: set[str] = set()
    ended = False
    for n, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        kind, _, rest = line.partition("\t")
        f = rest.split("\t")
        if kind == "end":
            ended = True
            break
        if kind == "id":
            uid = _int(f[0], n, "uid")
        elif kind == "file":
            if len(f) == 2 and f[1] in ("absent", "notfile"):
                files_[f[0]] = FileFact(f[0], "absent" if f[1] == "absent" else "other")
            elif len(f) == 7:
                files_[f[0]] = FileFact(f[0], "file", f[1], _mode(f[2], n), f[3], f[4],
                                        _int(f[5], n, "mtime"), _content(f[6], n))
            else:
                raise FactsError(f"line {n}: malformed file record")
        elif kind == "dir":
            if len(f) == 2 and f[1] in ("absent", "notdir"):
                dirs[f[0]] = DirFact(f[0], "absent" if f[1] == "absent" else "other")
            elif len(f) == 4:
                dirs[f[0]] = DirFact(f[0], "dir", _mode(f[1], n), f[2], f[3])
            else:
                raise FactsError(f"line {n}: malformed dir record")
        elif kind == "user":
            if len(f) != 7:
                raise FactsError(f"line {n}: malformed user record")
            users[f[0]] = UserFact(f[0], _int(f[1], n, "uid"), f[2], f[3], f[4],
                                   "" if f[5] == "-" else f[5], tuple(g for g in f[6].split(",") if g))
        elif kind == "nouser":
            absent.add(f[0])
        elif kind == "managed":
            managed.append(f[0])
        elif kind == "unit":
            unit_lines.append(rest)
        elif kind == "pkg":
            if len(f) >= 3:
                pkgs[f[0]] = PackageFact(f[0], f[1], f[2])
        elif kind == "os":
            os_ = dict(zip(("id", "version_id", "pretty_name"), f, strict=False))
        elif kind == "docker":
            docker = f[0] == "yes"
        elif kind == "gpu":
            parts = [p.strip() for p in rest.split(",")]
            if len(parts) >= 3:
                gpus.append(Gpu(parts[0], parts[1], parts[2]))
        elif kind == "listen":
            s = _socket(rest)
            if s:
                socks.append(s)
        elif kind == "tmp":
            if f[0] not in temps:
                temps.append(f[0])
        elif kind == "has":
            has.add(f[0])
        # unknown record kinds are ignored: a newer probe may say more
    if not ended:
        raise FactsError("the probe's answer is truncated (no 'end' record)")
    return Facts(uid=uid, files=files_, dirs=dirs, users=users, absent_users=frozenset(absent),
                 managed_users=tuple(dict.fromkeys(managed)), units=_units(unit_lines),
                 packages=pkgs, os=os_, docker=docker, gpus=tuple(gpus), listening=tuple(socks),
                 temps=tuple(temps), has=frozenset(has))


def _units(lines: list[str]) -> dict[str, UnitFact]:
    out: dict[str, UnitFact] = {}
    block: dict[str, str] = {}
    for line in [*lines, ""]:
        if line:
            k, _, v = line.partition("=")
            block[k] = v
            continue
        if "Id" in block:
            since = block.get("ActiveEnterTimestamp", "")
            out[block["Id"]] = UnitFact(
                block["Id"], block.get("LoadState", ""), block.get("UnitFileState", ""),
                block.get("ActiveState", ""), block.get("NeedDaemonReload") == "yes",
                int(since[1:]) if since.startswith("@") and since[1:].isdigit() else None)
        block = {}
    return out
