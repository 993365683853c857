"""Does the sshd drop-in take effect? Our settings vs what `sshd -T` reports, and the file
and line that wins where they differ. Pure.

The drop-in's settings are compared as `sshd -T` prints them (lower-case keys, a few values
spelt differently), globally and for each connection the probe asked about (`sshd -T -C
user=...`: the team and the operator login, from where the operator's connections come),
so that a Match block that overrides us for one user counts. The culprit is named by
reading the configuration as sshd does (`provision.facts.sshd_config`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from provision.facts.sshd_config import ANY, Conn, Setting, SshdConfig, normal, read, winner
from provision.facts.sshd_effective import SshdEffective
from provision.facts.units import UnitFact
from provision.frozen import frozen
from provision.text import printable

# What "weaker than the hardening" means for `audit` (an error there): a way in with a
# password. key -> the effective values that open it.
WEAK: dict[str, tuple[str, ...]] = {
    "passwordauthentication": ("yes",),
    "kbdinteractiveauthentication": ("yes",),
    "permitemptypasswords": ("yes",),
    "permitrootlogin": ("yes",),
}


# `sshd -T` prints these one line per name; the drop-in has them on one line
LISTS = frozenset({"allowusers", "allowgroups", "denyusers", "denygroups"})


def shown(view: SshdEffective, key: str) -> str:
    """What `sshd -T` shows for `key`, as the drop-in spells it (a list on one line)."""
    return " ".join(view.settings.get(key, ())) if key in LISTS else view.get(key)


def hardened(content: str) -> dict[str, str]:
    """The settings of a drop-in (lower-case keys -> value as written), first one wins."""
    out: dict[str, str] = {}
    for line in content.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            out.setdefault(key.lower(), value.strip())
    return out


@frozen
class Mismatch:
    key: str
    have: str  # what sshd -T shows ("" absent)
    want: str  # what our drop-in says
    user: str = ""  # "" for plain `sshd -T`, else the -C user
    origin: Setting | None = None  # who wins, as read from the config files

    def describe(self) -> str:
        scope = f" for user {self.user}" if self.user else ""
        head = f"sshd -T{scope} shows {self.key} {printable(self.have) or '(unset)'}, not {self.want}"
        if self.origin is None:
            return head + " (no file sets it: an sshd default, or a file we could not read)"
        if self.origin.match:
            return head + f": {self.origin.describe()} (a matching Match block wins)"
        return head + f": {self.origin.describe()}, read before ours (the first value wins)"


def conns(eff: SshdEffective) -> dict[str, Conn]:
    """The connections the probe asked sshd about, by user."""
    return {u: Conn(u, eff.addr, eff.laddr, eff.lport) for u in eff.users}


def compare(want: Mapping[str, str], eff: SshdEffective, cfg: SshdConfig,
            ours: str) -> list[Mismatch]:
    """Every hardened setting that `sshd -T` (global, then per user) does not show, each
    with the setting that wins. Empty when sshd -T was not probed or failed."""
    if eff.status != 0:
        return []
    out: list[Mismatch] = []
    cs = conns(eff)
    views: list[tuple[str, SshdEffective, Conn | None]] = [("", eff, None)]
    views += [(u, v, cs[u]) for u, v in eff.users.items() if v.status == 0]
    seen: set[tuple[str, str]] = set()
    for user, view, conn in views:
        for key, value in want.items():
            have = shown(view, key)
            if have.lower() == normal(key, value) or (key, have) in seen:
                continue
            seen.add((key, have))  # the same wrong value for every user: said once
            origin = winner(cfg, key, conn, have)
            out.append(Mismatch(key, have, value, user,
                                origin if origin is not None and origin.path != ours else None))
    return out


def predict(want: Mapping[str, str], cfg: SshdConfig, ours: str, candidate: str,
            users: Sequence[Conn]) -> list[Mismatch]:
    """Before installing `candidate` at `ours`: the hardened settings another file would
    still win (read as sshd reads it). `sshd -T` after the reload has the last word."""
    if not cfg.files:
        return []
    after = cfg.with_file(ours, candidate)
    out: list[Mismatch] = []
    seen: set[str] = set()
    for conn in (None, *users):
        reading = read(after, conn)
        for key, value in want.items():
            w = winner(after, key, conn, reading=reading)
            if w is None or w.path == ours or key in seen:
                continue
            if normal(key, w.value) != normal(key, value):
                seen.add(key)
                out.append(Mismatch(key, w.value, value, conn.user if conn else "", w))
    return out


@frozen
class Loose:
    """A Match block that opens a way in with a password for the connections it matches,
    whoever they are: `sshd -T -C` is asked only about the team, the operator and the
    probe's own address, so this is read from the files (`sshd -T` cannot list them all)."""

    key: str
    origin: Setting

    def describe(self) -> str:
        return (f"{self.origin.describe()} (a matching Match block wins over ours: a way in with "
                "a password for the connections it matches)")


def loose(cfg: SshdConfig, want: Mapping[str, str] | None = None) -> list[Loose]:
    """Every Match block setting that opens a `WEAK` way in (unless the inventory's hardening
    allows it), in reading order. A `Match all` value read first for a key shadows the later
    blocks (the first matching value wins): those are not named."""
    if not cfg.files:
        return []
    settings = [s for s in read(cfg, ANY).settings if s.match]
    out: list[Loose] = []
    for key, bad in WEAK.items():
        if want is not None and normal(key, want.get(key, "")) in bad:
            continue  # the inventory's own hardening allows it
        for s in (s for s in settings if s.key == key):
            if normal(key, s.value) in bad:
                # said as the line it is (it applies where its block matches, no "may")
                out.append(Loose(key, replace(s, certain=True)))
            if s.certain:
                break  # `Match all`: every connection reads this value first
    return out


@frozen
class Weak:
    key: str
    value: str
    user: str
    origin: Setting | None
    scoped: bool = False  # read from a Match block (`loose`), not from a probed sshd -T

    def describe(self) -> str:
        scope = (f" for user {self.user}" if self.user
                 else " for the connections its Match block matches" if self.scoped else "")
        where = (f": {self.origin.describe()}" if self.origin is not None
                 else " (sshd's default: no file sets it)")
        return f"sshd runs with {self.key} {printable(self.value)}{scope}{where}"


def weaknesses(eff: SshdEffective, cfg: SshdConfig,
               want: Mapping[str, str] | None = None) -> list[Weak]:
    """Effective settings that let a password in where the hardening does not (`WEAK`),
    globally or for a probed user."""
    if eff.status != 0:
        return []
    out: list[Weak] = []
    seen: set[tuple[str, str]] = set()
    cs = conns(eff)
    views: list[tuple[str, SshdEffective, Conn | None]] = [("", eff, None)]
    views += [(u, v, cs[u]) for u, v in eff.users.items() if v.status == 0]
    for user, view, conn in views:
        for key, bad in WEAK.items():
            if want is not None and normal(key, want.get(key, "")) in bad:
                continue  # the inventory's own hardening allows it
            have = view.get(key).lower()
            if have in bad and (key, have) not in seen:
                seen.add((key, have))
                out.append(Weak(key, have, user, winner(cfg, key, conn, have)))
    named = {(w.origin.path, w.origin.line) for w in out if w.origin is not None}
    for x in loose(cfg, want):  # Match blocks for connections nobody asked sshd about
        if (x.origin.path, x.origin.line) not in named:
            out.append(Weak(x.key, normal(x.key, x.origin.value), "", x.origin, scoped=True))
    return out


# --- socket activation ---------------------------------------------------------------------

def _endpoint(text: str) -> tuple[str, str]:
    """`[::]:22`, `0.0.0.0:22`, `10.0.0.1:2222` or `22` -> (host, port); any-address -> "*"."""
    text = text.split(" (", 1)[0].strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]")
    return ("*" if host in ("", "::", "0.0.0.0") else host, port)


def socket_mismatch(eff: SshdEffective, socket: UnitFact | None) -> str | None:
    """On a host whose sshd is started from ssh.socket, where sshd listens is the socket's
    ListenStream, not sshd_config's Port/ListenAddress (Ubuntu's generator copies them into
    the socket only at daemon-reload; Debian has none). When the two disagree, a port or
    listen-address setting does not take effect: why, or None."""
    if socket is None or not socket.active or eff.status != 0:
        return None
    sock = {_endpoint(x) for x in socket.listen}
    conf = {_endpoint(x) for x in eff.settings.get("listenaddress", ())}
    if not sock or not conf or sock == conf:
        return None
    show = ", ".join(sorted(f"{h}:{p}" for h, p in conf))
    listens = ", ".join(x.split(" (", 1)[0] for x in socket.listen)
    return (f"sshd is started from ssh.socket, which listens on {listens}; sshd_config's "
            f"Port/ListenAddress ({show}) do not reach it: provision does not rewrite the "
            "socket; make them agree (Ubuntu: `systemctl daemon-reload && systemctl restart "
            "ssh.socket` regenerates it from sshd_config; Debian: ListenStream= in a "
            "ssh.socket drop-in)")
