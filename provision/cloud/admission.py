"""Which machines a security-group plan may cut off from SSH, and how to undo it. Pure.

`sg apply` confirms, after the change, that a new SSH connection still reaches each
machine the plan touches on its SSH port, and reverts what touched it when none does
within the window. A machine is touched when it is an EC2 instance of the inventory (an
`aws:` block: the ones provision knows the groups govern) and either its attachment
changes, or an ingress rule admitting TCP on its SSH port is revoked or authorized in one
of its groups (those it is declared in, and those it had before the apply: a stopped apply
may leave it there). A machine behind a bastion (any host, EC2 or not) is also touched by an
egress rule admitting TCP on its SSH port changing in one of that bastion's groups: its
SSH connection leaves the bastion through them. Description changes admit nothing new
and are not counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from provision.frozen import frozen
from provision.inventory.model import Inventory

from .attach import AttachPlan, machines
from .rules import GroupPlan, LiveGroup, RuleKey


@frozen
class Touched:
    machine: str
    groups: tuple[str, ...]  # group names whose SSH rules change
    attachment: bool  # its attachment changes

    @property
    def why(self) -> str:
        parts = [f"the SSH rules of {', '.join(self.groups)}"] if self.groups else []
        if self.attachment:
            parts.append("its attached groups")
        return " and ".join(parts)


def _ssh_rule_changes(plan: GroupPlan, port: int, egress: bool = False) -> bool:
    keys = [r.key for r in plan.revoke] + [k for k, _ in plan.authorize]
    return any(k.egress == egress and k.admits_tcp(port) for k in keys)


def touched(inv: Inventory, groups: Sequence[GroupPlan], attachments: Sequence[AttachPlan],
            held: Mapping[str, Sequence[str]] | None = None) -> list[Touched]:
    """The machines whose SSH admission the plan changes. `held`: machine -> the group ids
    its instance had before the apply; a group it is leaving (or had not yet left when the
    apply stopped) governs its SSH too."""
    changed_attachment = {a.machine for a in attachments if a.has_changes}
    ec2 = {n.name for n in machines(inv)}
    had = held or {}
    out = []
    for node in (*inv.bastions, *inv.hosts):
        names = tuple(p.name for p in groups if node.name in ec2
                      and (p.name in node.security_groups or p.group_id in had.get(node.name, ()))
                      and _ssh_rule_changes(p, node.port))
        names += tuple(p.name for b in inv.chain(node) for p in groups
                       if p.name in b.security_groups and p.name not in names
                       and _ssh_rule_changes(p, node.port, egress=True))
        if names or node.name in changed_attachment:
            out.append(Touched(node.name, names, node.name in changed_attachment))
    return out


def revert_group(before: LiveGroup, now: LiveGroup) -> GroupPlan:
    """The plan that puts `now`'s rules back to `before`'s (rule ids change; keys do not)."""
    old: Mapping[RuleKey, str] = {r.key: r.description for r in before.rules}
    have = {r.key for r in now.rules}
    revoke = tuple(r for r in now.rules if r.key not in old)
    authorize = tuple(sorted(((k, d) for k, d in old.items() if k not in have), key=lambda x: x[0].order()))
    return GroupPlan(now.name, now.id, now.vpc, now.description, now.managed, revoke=revoke,
                     authorize=authorize)


def revert_attachment(a: AttachPlan) -> AttachPlan:
    """The attachment as it was before the apply."""
    return AttachPlan(a.machine, a.instance, a.eni, a.want, a.current)
