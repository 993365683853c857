"""Deleting the managed groups the inventory dropped, and the change-fraction guard. Pure.

A group is deleted only when it carries `managed-by: provision`, sits in a VPC the
inventory's groups use, and no declared group stands for it. AWS refuses to delete a group
that a network interface carries or another group's rule references
(DependencyViolation), so the plan finds those holders first: an interface that this
apply detaches it from, or a rule this apply revokes, does not hold it; anything else does,
and the plan fails naming them (before any change, so nothing is half-done).

The guard is DNS's (`provision.dns.zone_plan`): refuse without --force when the plan deletes
any group, or revokes more than 30 % of the managed rules (of at least 10).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from provision.dns.zone_plan import GUARD_FRACTION, GUARD_MIN_RECORDS
from provision.frozen import frozen

from .attach import AttachPlan
from .rules import GroupPlan, LiveGroup


@frozen
class LiveInterface:
    id: str
    instance: str  # "" when not attached to an instance (a load balancer's, a Lambda's)
    description: str
    groups: tuple[str, ...]


@frozen
class DeletePlan:
    group: LiveGroup
    holders: tuple[str, ...] = ()  # what keeps AWS from deleting it, one phrase each

    @property
    def error(self) -> str:
        if not self.holders:
            return ""
        return (f"cannot delete {self.group.name} ({self.group.id}): still used by "
                + "; ".join(self.holders) + ". Detach it there (or declare the group again)")


def live_interfaces(interfaces: Iterable[Mapping[str, Any]]) -> list[LiveInterface]:
    """describe_network_interfaces `NetworkInterfaces` (all pages) as LiveInterfaces."""
    return [LiveInterface(str(n.get("NetworkInterfaceId", "")),
                          str(n.get("Attachment", {}).get("InstanceId", "") or ""),
                          str(n.get("Description", "") or ""),
                          tuple(str(g.get("GroupId", "")) for g in n.get("Groups", [])))
            for n in interfaces]


def dropped(live: Sequence[LiveGroup], plans: Sequence[GroupPlan], vpcs: Iterable[str]) -> list[LiveGroup]:
    """Managed groups in the inventory's VPCs that no declared group stands for."""
    kept = {p.group_id for p in plans if p.group_id}
    in_vpcs = set(vpcs)
    return [g for g in live if g.managed and g.vpc in in_vpcs and g.id not in kept and g.name != "default"]


def plan_deletions(doomed: Sequence[LiveGroup], interfaces: Sequence[LiveInterface],
                   referencing: Sequence[LiveGroup], plans: Sequence[GroupPlan],
                   attachments: Sequence[AttachPlan], machine_of: Mapping[str, str]) -> list[DeletePlan]:
    """Each dropped group with what would still hold it after the rest of the plan.

    `referencing` are the groups with a rule naming a doomed group; `machine_of` maps
    instance ids to inventory machine names (for the message)."""
    doomed_ids = {g.id for g in doomed}
    after = {a.eni: set(a.want) for a in attachments if a.eni and not a.error}
    revoked = {r.id for p in plans for r in p.revoke}
    out = []
    for g in doomed:
        holders: list[str] = []
        for n in interfaces:
            if g.id not in n.groups or g.id not in after.get(n.id, {g.id}):
                continue
            if n.instance:
                who = f" ({machine_of[n.instance]})" if n.instance in machine_of else ""
                holders.append(f"network interface {n.id} of instance {n.instance}{who}")
            else:
                holders.append(f"network interface {n.id}" + (f" ({n.description})" if n.description else ""))
        for other in referencing:
            if other.id in doomed_ids:
                continue  # deleted in the same apply: its rules go with it
            rules = [r for r in other.rules if r.key.peer == g.id and r.id not in revoked]
            if rules:
                holders.append(f"{len(rules)} rule(s) of group {other.name} ({other.id})")
        out.append(DeletePlan(g, tuple(holders)))
    return out


def guard(plans: Sequence[GroupPlan], live: Sequence[LiveGroup], deletions: Sequence[DeletePlan]) -> str:
    """Why this plan needs --force ("" when it does not)."""
    if deletions:
        names = ", ".join(d.group.name for d in deletions)
        return f"the plan deletes {len(deletions)} security group(s) ({names}); check it and pass --force"
    by_id = {g.id: g for g in live}
    managed = sum(len(by_id[p.group_id].rules) for p in plans
                  if p.managed and p.group_id in by_id)
    gone = sum(len(p.revoke) for p in plans if p.managed and p.group_id in by_id)
    if managed >= GUARD_MIN_RECORDS and gone > GUARD_FRACTION * managed:
        return (f"the plan revokes {gone} of the {managed} managed rules (more than "
                f"{int(GUARD_FRACTION * 100)} %); check it and pass --force")
    return ""
