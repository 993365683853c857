"""Who logs in on each hop, with which key (pure): `--user` means the same everywhere.

`choose_login` turns `--user NAME` (or `$USER` when it names a team member) into a `Login`;
`hops` applies it to a host's jump chain. A team member logs in as themselves on every hop
with their own `identity_file`; a login user named with `--user` keeps each hop's key; no
`--user` keeps each hop's inventory user and key. Converge, exec, tunnels and the Fabric
API (`provision.fleet`) all go through these two functions.
"""

from __future__ import annotations

from provision.errors import UsageError
from provision.frozen import frozen
from provision.inventory.model import Host, Inventory


class LoginError(UsageError):
    """`--user` names nobody the inventory knows; exit status 2."""


@frozen
class Login:
    """Who logs in on every hop, with which key (None: the default per hop)."""

    user: str | None  # None: each hop's own inventory user
    identity_file: str | None  # None: each hop's own key (or the ssh defaults)
    team_member: bool = False


DEFAULT_LOGIN = Login(None, None)


@frozen
class Hop:
    """One SSH hop: where, as whom, with which key (None: the key policy's defaults)."""

    name: str
    address: str
    port: int
    user: str
    identity_file: str | None


def choose_login(inv: Inventory, requested: str | None, local_user: str | None) -> Login:
    """--user NAME, else $USER when a team member, else each hop's inventory login user."""
    team = {p.name: p for p in inv.team}
    name = requested or (local_user if local_user in team else None)
    if name is None:
        return DEFAULT_LOGIN
    if name in team:
        return Login(name, team[name].identity_file, team_member=True)
    logins = {h.user for h in (*inv.bastions, *inv.hosts)} | {inv.default_user}
    if name in logins:
        return Login(name, None)
    raise LoginError(f"unknown user '{name}' (team: {', '.join(team) or 'none'}; "
                     f"login users: {', '.join(sorted(logins))})")


def hop(node: Host, login: Login = DEFAULT_LOGIN) -> Hop:
    """`node` as `login` reaches it."""
    user = login.user or node.user
    key = login.identity_file if login.team_member else node.identity_file
    return Hop(node.name, node.address, node.port, user, key)


def hops(inv: Inventory, host: Host, login: Login = DEFAULT_LOGIN) -> tuple[Hop, ...]:
    """The jump chain and the host, outermost first, with the login for each."""
    return tuple(hop(h, login) for h in (*inv.chain(host), host))
