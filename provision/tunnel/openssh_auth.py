"""Which hop of an OpenSSH jump chain refused the login, and with which key (pure), worded
as the paramiko backend words it (`provision.ssh.link`): `bastion (10.0.0.1:22):
authentication failed as admin (tried: ~/.ssh/team)`.

OpenSSH 9.2 says `USER@HOSTNAME: Permission denied (METHODS).` for the hop that refused;
a ProxyJump helper is an ssh of its own writing to the same stderr, and a hop is refused
before the next one is tried, so at most one such line names a hop of the chain. A key it
could not use is said as `no such identity: PATH: WHY` (a config's IdentityFile), `Warning:
Identity file PATH not accessible: WHY.` (`-i`) or `Load key "PATH": WHY`, with `~`
expanded to the account's home from the password database. What it
offers is what the rendered config and the command line name: the hop's `identity_file`
(`IdentitiesOnly yes`, so the agent only for that key), else the agent's keys and its own
default files. (Checked against sshd 9.2 on loopback: a refusing jump host and a refusing
target each print their own line with the hop's HostName.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from provision.ssh.login import Hop

_DENIED = re.compile(r"^(?P<user>[^@\s]+)@(?P<host>\S+): Permission denied \((?P<methods>[^)]*)\)",
                     re.M)
_NO_KEY = re.compile(r"^no such identity: (?P<path>.+): (?P<why>[^:\n]+?)\s*$", re.M)
_BAD_KEY = re.compile(r'^Load key "(?P<path>[^"\n]+)": (?P<why>[^\n]+?)\s*$', re.M)
_NOT_ACCESSIBLE = re.compile(
    r"^Warning: Identity file (?P<path>.+) not accessible: (?P<why>[^\n]+?)\.?\s*$", re.M)

DEFAULT_OFFER = "the ssh-agent's keys and ssh's default keys (~/.ssh/id_*)"


def refused_hop(stderr: str, chain: Sequence[Hop]) -> tuple[Hop | None, str, str] | None:
    """(the hop that refused, the user it refused, the host as ssh named it), or None when
    ssh did not say permission denied. The hop is None when no hop of `chain` has that
    address (ssh then said something we cannot place)."""
    m = _DENIED.search(stderr)
    if m is None:
        return None
    host, user = m["host"].strip("[]"), m["user"]
    at = [h for h in chain if h.address == host]
    hop = next((h for h in at if h.user == user), at[0] if at else None)
    return hop, user, host


def key_problems(stderr: str) -> dict[str, str]:
    """Path -> why ssh could not use that key file (missing, bad permissions, format)."""
    return {m["path"]: m["why"] for pattern in (_BAD_KEY, _NO_KEY, _NOT_ACCESSIBLE)
            for m in pattern.finditer(stderr)}


def offered(hop: Hop, problems: dict[str, str]) -> str:
    """What ssh offered `hop`, with why a named key file could not be used."""
    if not hop.identity_file:
        return DEFAULT_OFFER
    path = hop.identity_file
    # `~/k` is the home ssh took from the password database: match by what follows it
    why = next((w for p, w in problems.items()
                if p == path or (path.startswith("~/") and p.endswith(path[1:]))), "")
    return f"{path} ({why[0].lower()}{why[1:]})" if why else path


def auth_failure(stderr: str, chain: Sequence[Hop]) -> str | None:
    """The one line for a refused login (None: ssh's stderr says no login was refused)."""
    found = refused_hop(stderr, chain)
    if found is None:
        return None
    hop, user, host = found
    if hop is None:
        return f"{host}: authentication failed as {user}"
    tried = offered(hop, key_problems(stderr))
    return f"{hop.name} ({hop.address}:{hop.port}): authentication failed as {user} (tried: {tried})"
