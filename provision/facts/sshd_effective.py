"""Fact: sshd's effective configuration (`sshd -T`, lower-case keys), globally and per
connection (`sshd -T -C user=U,host=A,addr=A` for each `C:` user, A being where the probe's
own SSH session comes from, so that Match blocks count). Pure parser."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from provision.frozen import frozen

from .spec import FactSpec, Rec, number


@frozen
class SshdEffective:
    # key -> values (keys such as listenaddress or hostkey repeat); lower-case keys
    settings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    status: int | None = None  # exit status of sshd -T; None: not probed
    error: str = ""  # its output when it failed
    users: dict[str, SshdEffective] = field(default_factory=dict)  # sshd -T -C per user
    addr: str = ""  # the probe's SSH client address ("" unknown), laddr/lport: sshd's side
    laddr: str = ""
    lport: str = ""
    uniform: bool = False  # no Match block anywhere: every user's view is the global one

    def get(self, key: str) -> str:
        """The (first) value of a setting, "" when absent."""
        values = self.settings.get(key.lower(), ())
        return values[0] if values else ""


def settings_of(lines: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """`sshd -T` output lines -> lower-case key -> values."""
    out: dict[str, list[str]] = {}
    for line in lines:
        key, _, value = line.strip().partition(" ")
        if key:
            out.setdefault(key.lower(), []).append(value.strip())
    return {k: tuple(v) for k, v in out.items()}


def _one(lines: list[str], status: int | None) -> SshdEffective:
    if status not in (None, 0):
        return SshdEffective({}, status, "\n".join(lines)[-500:])
    return SshdEffective(settings_of(lines), status)


def _rc(value: str) -> int | None:
    n = number(value, 255)  # ASCII digits only (host output)
    return n


def parse(records: Sequence[Rec]) -> SshdEffective:
    lines: list[str] = []
    status: int | None = None
    per: dict[str, list[str]] = {}
    per_rc: dict[str, int | None] = {}
    addr = laddr = lport = ""
    same: list[str] = []  # users whose view is the global one (no Match block anywhere)
    for r in records:
        if r.kind == "sshdt":
            lines.append(r.raw)
        elif r.kind == "sshdrc" and r.fields:
            status = _rc(r.fields[0])
        elif r.kind == "sshdc" and r.fields:
            per.setdefault(r.fields[0], []).append(r.raw.partition("\t")[2])
        elif r.kind == "sshdcrc" and len(r.fields) == 2:
            per_rc[r.fields[0]] = _rc(r.fields[1])
        elif r.kind == "sshdconn" and len(r.fields) == 3:
            addr, laddr, lport = r.fields
        elif r.kind == "sshdcsame" and r.fields:
            same.append(r.fields[0])
    top = _one(lines, status)
    users = {u: _one(per.get(u, []), rc) for u, rc in per_rc.items()}
    users.update({u: SshdEffective(top.settings, top.status, top.error) for u in same})
    return SshdEffective(top.settings, top.status, top.error, users, addr, laddr, lport,
                         bool(same) and not per_rc)


SPEC = FactSpec("sshd_effective", ("sshdt", "sshdrc", "sshdc", "sshdcrc", "sshdconn", "sshdcsame"),
                parse)
