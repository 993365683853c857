"""authorized_keys' findings (pure): team members' keys drifted, former members' keys left."""

from __future__ import annotations

from provision.facts import Facts
from provision.finding import Finding
from provision.inventory.model import Host, Inventory
from provision.steps.files import sha256
from provision.steps.users import authorized_keys


def key_findings(inv: Inventory, host: Host, facts: Facts) -> list[Finding]:
    if not facts.users and not facts.absent_users:
        return []  # users were not probed
    out = []
    team = {p.name for p in inv.team}
    for p in inv.team:
        u = facts.users.get(p.name)
        if u is None:
            out.append(Finding("warning", "keys-drift", f"{host.name}/{p.name}",
                               f"team member {p.name} has no account on {host.name}", "re-apply"))
            continue
        f = facts.file(f"{u.home}/.ssh/authorized_keys")
        if f.kind != "file" or f.sha256 != sha256(authorized_keys(p.name, p.keys)):
            what = "is missing" if f.kind != "file" else "differs from the team's keys"
            out.append(Finding("warning", "keys-drift", f"{host.name}/{p.name}",
                               f"{u.home}/.ssh/authorized_keys {what}", "re-apply (users step)"))
    for name in facts.managed_users:
        if name in team:
            continue
        former = facts.file(f"{facts.users[name].home}/.ssh/authorized_keys") if name in facts.users else None
        keys = [ln for ln in (former.content or "").splitlines()
                if ln and not ln.startswith("#")] if former else []
        if keys:
            out.append(Finding("error", "keys-former-member", f"{host.name}/{name}",
                               f"{name} is not in the team but still has {len(keys)} key(s) in "
                               "authorized_keys", "re-apply (users step retires the account)"))
    return out
