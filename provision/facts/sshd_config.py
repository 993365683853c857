"""Fact: sshd's configuration files, and where each setting comes from, read as sshd reads
them. Pure: the parser takes the probe's records; `read` decides nothing about the host.

sshd keeps the FIRST value it reads for a keyword. It reads `sshd_config` from the top; an
`Include` reads the files its globs match (relative to /etc/ssh, in C order) in place; a
`Match` block's lines count only for a connection the block matches, and a matching
block's value beats any global one, wherever it stands (sshd re-reads the whole file for
each connection, with only matching blocks active, and copies what those set over the
global values). A `Match` in an included file ends with that file. This is what OpenSSH
9.2 does (checked with `sshd -T -C` on Debian 12); `sshd -T` stays the truth, this module
only names the file and line that wins.
"""

from __future__ import annotations

import fnmatch
import functools
import ipaddress
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field

from provision.frozen import frozen
from provision.text import printable

from .spec import FactsError, FactSpec, Rec

SSHD_CONFIG = "/etc/ssh/sshd_config"
MAX_DEPTH = 16
# Older spellings sshd still reads as the same keyword (servconf.c's table): a cloud image's
# `ChallengeResponseAuthentication yes` is kbdinteractiveauthentication for `sshd -T`.
KEY_ALIASES = {
    "challengeresponseauthentication": "kbdinteractiveauthentication",
    "skeyauthentication": "kbdinteractiveauthentication",
    "pubkeyacceptedkeytypes": "pubkeyacceptedalgorithms",
    "hostbasedacceptedkeytypes": "hostbasedacceptedalgorithms",
    "dsaauthentication": "pubkeyauthentication",
}


@frozen
class SshdConfig:
    """The configuration files the probe found, path -> text (empty: not probed)."""

    files: dict[str, str] = field(default_factory=dict)

    def with_file(self, path: str, text: str | None) -> SshdConfig:
        """The same files with `path` replaced (None: removed): a candidate drop-in."""
        files = {p: t for p, t in self.files.items() if p != path}
        if text is not None:
            files[path] = text
        return SshdConfig(files)


def parse(records: Sequence[Rec]) -> SshdConfig:
    lines: dict[str, list[str]] = {}
    for r in records:
        if r.kind == "sshdcf" and r.fields:
            lines.setdefault(r.raw, [])
        elif r.kind == "sshdln":
            path, n, text = [*r.raw.split("\t", 2), "", ""][:3]
            if path not in lines or not n.isdigit() or int(n) != len(lines[path]) + 1:
                raise FactsError(f"line {r.line}: sshd config line out of order")
            lines[path].append(text)
    return SshdConfig({p: "".join(t + "\n" for t in ls) for p, ls in lines.items()})


SPEC = FactSpec("sshd_config", ("sshdcf", "sshdln"), parse)


# --- reading the config as sshd does -------------------------------------------------------

@frozen
class Conn:
    """A connection, as `sshd -T -C` takes it. Empty fields are unknown."""

    user: str
    addr: str = ""
    laddr: str = ""
    lport: str = ""

    def spec(self) -> str:
        """The `-C` argument (host = addr: without UseDNS sshd matches Host on the address)."""
        parts = [f"user={self.user}"]
        if self.addr:
            parts += [f"host={self.addr}", f"addr={self.addr}"]
        if self.laddr:
            parts.append(f"laddr={self.laddr}")
        if self.lport:
            parts.append(f"lport={self.lport}")
        return ",".join(parts)


@frozen
class Setting:
    key: str  # lower case
    value: str  # the rest of the line, as written
    path: str
    line: int
    match: str = ""  # the Match line that scopes it ("" for a global setting)
    certain: bool = True  # False: a Match block whose criteria we cannot evaluate (Group)

    def where(self) -> str:
        return f"{printable(self.path)}:{self.line}"

    def describe(self) -> str:
        """One line for a recap; the host's text (paths, values) escaped."""
        scope = f" (in `{printable(self.match)}`)" if self.match else ""
        maybe = " may apply" if not self.certain else ""
        return f"{self.where()}{scope}{maybe} sets {printable(self.key)} {printable(self.value)}"


# `read(cfg, ANY)`: every Match block may apply (certain only for `Match all`), for the
# connections nobody asked `sshd -T -C` about (other users, other addresses)
ANY = Conn("*")


def everywhere(match: str) -> bool:
    """Is this Match line `Match all` (it applies to every connection)?"""
    return [t.lower() for t in match.split()[1:]] == ["all"]


@dataclass
class _Ctx:
    match: str = ""
    applies: bool | None = True  # None: cannot tell


@functools.lru_cache(maxsize=4096)
def _tokens(line: str) -> tuple[str, ...]:
    """sshd's split: whitespace (or one `=` after the keyword), double quotes, `#` starts a
    comment at the start of a word. Cached: a diff reads the same lines for every key and
    connection it checks."""
    out: list[str] = []
    cur: list[str] = []
    quoted = started = False
    for ch in line:
        if quoted:
            if ch == '"':
                quoted = False
            else:
                cur.append(ch)
        elif ch == '"':
            quoted = started = True
        elif ch.isspace() or (ch == "=" and len(out) == 0):
            if started:
                out.append("".join(cur))
                cur, started = [], False
        elif ch == "#" and not started:
            break
        else:
            cur.append(ch)
            started = True
    if started:
        out.append("".join(cur))
    return tuple(out)


def _glob(pattern: str, paths: Sequence[str]) -> list[str]:
    """Which of `paths` a glob matches, as glob(3) would: per path component, `*` never
    crosses `/` nor matches a leading dot; in C (byte) order."""
    want = pattern.split("/")

    def hit(path: str) -> bool:
        have = path.split("/")
        return len(have) == len(want) and all(
            fnmatch.fnmatchcase(h, w) and (not h.startswith(".") or w.startswith("."))
            for h, w in zip(have, want, strict=True))

    return sorted((p for p in paths if hit(p)), key=lambda p: p.encode())


def _pattern_list(value: str, candidates: Sequence[str]) -> bool:
    """sshd's match_pattern_list: a negated match fails the list; else any positive match."""
    hit = False
    for pat in value.split(","):
        neg = pat.startswith("!")
        pat = pat[1:] if neg else pat
        if any(fnmatch.fnmatchcase(c.lower(), pat.lower()) for c in candidates):
            if neg:
                return False
            hit = True
    return hit


def _addr_list(value: str, addr: str) -> bool:
    """Address patterns: CIDRs or wildcards, `!` negates."""
    hit = False
    for pat in value.split(","):
        neg = pat.startswith("!")
        pat = pat[1:] if neg else pat
        try:
            ok = ipaddress.ip_address(addr) in ipaddress.ip_network(pat, strict=False)
        except ValueError:
            ok = fnmatch.fnmatchcase(addr, pat)
        if ok:
            if neg:
                return False
            hit = True
    return hit


def _matches(args: list[str], conn: Conn | None) -> bool | None:
    """Does `Match ARGS` apply to `conn`? None: cannot tell (Group, RDomain, a field we lack)."""
    if len(args) == 1 and args[0].lower() == "all":
        return True  # every connection, plain `sshd -T` too (sshd tests it with a blank one)
    if conn is None:
        return False  # plain `sshd -T`: no other Match block applies
    if conn is ANY:
        return None  # some connection, maybe
    result: bool | None = True
    i = 0
    while i < len(args):
        crit = args[i].lower()
        if crit == "all":
            i += 1
            continue
        value = args[i + 1] if i + 1 < len(args) else ""
        i += 2
        ok: bool | None
        if crit == "user":
            ok = _pattern_list(value, [conn.user])
        elif crit == "host":
            ok = _pattern_list(value, [conn.addr]) if conn.addr else None
        elif crit == "address":
            ok = _addr_list(value, conn.addr) if conn.addr else None
        elif crit == "localaddress":
            ok = _addr_list(value, conn.laddr) if conn.laddr else None
        elif crit == "localport":
            ok = conn.lport in value.split(",") if conn.lport else None
        else:  # group, rdomain, invalid-user, ...: not known from here
            ok = None
        if ok is False:
            return False
        if ok is None:
            result = None
    return result


@dataclass
class Reading:
    """Every setting in reading order, with the Match scope it was read under."""

    settings: list[Setting] = field(default_factory=list)


def _walk(cfg: SshdConfig, path: str, conn: Conn | None, ctx: _Ctx, out: Reading,
          depth: int) -> None:
    text = cfg.files.get(path)
    if text is None or depth > MAX_DEPTH:
        return
    paths = sorted(cfg.files)
    mine = _Ctx(ctx.match, ctx.applies)  # a Match in this file ends with it
    for n, raw in enumerate(text.splitlines(), start=1):
        toks = _tokens(raw)
        if not toks:
            continue
        key, args = toks[0].lower(), list(toks[1:])
        if key == "include":
            for pat in args:
                full = pat if pat.startswith("/") else posixpath.join("/etc/ssh", pat)
                for p in _glob(full, paths):
                    _walk(cfg, p, conn, mine, out, depth + 1)
        elif key == "match":
            # `Match all` is a block like any other: its values beat the global ones for
            # every connection (checked: a `Match all` in a later drop-in shows in sshd -T)
            mine = _Ctx(" ".join(toks), _matches(args, conn))
        else:
            out.settings.append(Setting(KEY_ALIASES.get(key, key), " ".join(args), path, n,
                                        mine.match, mine.applies is not None))
            if mine.match and mine.applies is False:
                out.settings.pop()


def read(cfg: SshdConfig, conn: Conn | None = None) -> Reading:
    """The settings sshd reads for `conn` (None: plain `sshd -T`, no Match block)."""
    out = Reading()
    _walk(cfg, SSHD_CONFIG, conn, _Ctx(), out, 0)
    return out


# sshd -T spells some values differently from sshd_config
ALIASES = {("permitrootlogin", "prohibit-password"): "without-password"}


def normal(key: str, value: str) -> str:
    """A value as `sshd -T` prints it (compared case-insensitively)."""
    v = value.strip().strip('"').lower()
    return ALIASES.get((key.lower(), v), v)


def winner(cfg: SshdConfig, key: str, conn: Conn | None = None,
           have: str | None = None, reading: Reading | None = None) -> Setting | None:
    """The setting sshd uses for `key` (lower case): the first value of a matching Match
    block, else the first global one. None: sshd's default. A block we cannot evaluate
    (Match Group) is named (flagged `certain=False`) only when it explains `have`, the
    value `sshd -T` showed, and nothing certain does. `reading`: `read(cfg, conn)`, when
    the caller has it already."""
    key = key.lower()
    found = [s for s in (reading or read(cfg, conn)).settings if s.key == key]
    matched = [s for s in found if s.match and s.certain]
    if matched:
        return matched[0]
    glob = [s for s in found if not s.match]
    if have is not None and not (glob and normal(key, glob[0].value) == normal(key, have)):
        maybe = [s for s in found if s.match and not s.certain
                 and normal(key, s.value) == normal(key, have)]
        if maybe:
            return maybe[0]
    return glob[0] if glob else None


def included(cfg: SshdConfig, path: str) -> bool:
    """Does sshd read `path`, globally (an Include outside any Match names it)?"""
    if not cfg.files:
        return True  # not probed: nothing to say
    probe = cfg.with_file(path, "provisionprobe yes\n")
    return any(s.path == path and (not s.match or everywhere(s.match))
               for s in read(probe).settings)
