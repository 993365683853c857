"""Would the inventory's AllowGroups lock someone out of this host? Pure.

AllowUsers is checked when the inventory is loaded (names are known there); the groups an
account is in are the host's, so AllowGroups is checked against the probe's users fact:
the login user and every member who tunnels to their own server here (or through this
bastion) must be in one of the groups. A member provision has yet to create will be in
their own group (`useradd -U`) and no other.
"""

from __future__ import annotations

from collections.abc import Mapping

from provision.facts.users import Users
from provision.inventory import sshd_options as so


def group_lockout(options: so.Options, required: Mapping[str, str], users: Users) -> str | None:
    """Why the sshd step refuses (who would be locked out), or None."""
    allowed = so.get(options, "AllowGroups")
    if allowed is None:
        return None
    groups = set(allowed.split())
    out = []
    for name, why in required.items():
        u = users.users.get(name)
        have = {name} if u is None else {u.group, *u.groups}
        if not have & groups:
            out.append(f"{name} ({why}; in {', '.join(sorted(have))})")
    if not out:
        return None
    return (f"sshd: AllowGroups {allowed} would lock out " + ", ".join(out)
            + ": add one of their groups to AllowGroups (inventory sshd.AllowGroups)")
