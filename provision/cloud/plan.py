"""The whole security-group plan: rules, attachments, deletions, the clusters' placement
groups, and what blocks it. Pure.

`build()` joins what the shell read (groups, instances, interfaces, VPCs) with the
inventory; `sg plan` prints it and `sg apply` executes it. Everything that can be known
before a change is checked here (missing VPCs, instances, groups; what holds a group to be
deleted), so an apply that starts has no known reason to stop half-way.
"""

from __future__ import annotations

from dataclasses import field, replace

from provision.frozen import frozen
from provision.inventory.model import Inventory

from .attach import AttachPlan, LiveInstance, plan_attachments
from .placement import LivePlacement, PlacementPlan, plan_placements
from .prune import DeletePlan, LiveInterface, dropped, guard, plan_deletions
from .rules import GroupPlan, LiveGroup, plan_groups


@frozen
class Live:
    """What the shell read from AWS for one plan."""

    groups: tuple[LiveGroup, ...]
    instances: tuple[LiveInstance, ...] = ()
    missing_vpcs: tuple[str, ...] = ()
    interfaces: tuple[LiveInterface, ...] = ()  # carrying a group to delete
    referencing: tuple[LiveGroup, ...] = ()  # with a rule naming a group to delete
    placements: tuple[LivePlacement, ...] = ()  # the placement groups the clusters name


@frozen
class SgPlan:
    groups: tuple[GroupPlan, ...]
    attachments: tuple[AttachPlan, ...] = ()
    deletions: tuple[DeletePlan, ...] = ()
    errors: tuple[str, ...] = ()  # plan-wide (a missing VPC)
    guard: str = ""  # why --force is needed
    names: dict[str, str] = field(default_factory=dict)  # group id -> name, for display
    before: tuple[LiveGroup, ...] = ()  # the live groups the plan was made from (for a revert)
    placements: tuple[PlacementPlan, ...] = ()

    @property
    def failed(self) -> bool:
        return bool(self.errors or any(p.error for p in self.groups)
                    or any(a.error for a in self.attachments) or any(d.error for d in self.deletions)
                    or any(p.error for p in self.placements))

    @property
    def has_changes(self) -> bool:
        return bool(any(p.has_changes for p in self.groups) or any(a.has_changes for a in self.attachments)
                    or self.deletions or any(p.has_changes for p in self.placements))


def vpcs(inv: Inventory) -> list[str]:
    """The VPCs the inventory declares groups in."""
    assert inv.aws is not None
    return sorted({g.vpc for g in inv.aws.security_groups if g.vpc})


def build(inv: Inventory, live: Live) -> SgPlan:
    """The plan for `inv` against `live`. Pure."""
    assert inv.aws is not None
    plans = [p if p.vpc not in live.missing_vpcs or p.group_id else
             replace(p, error=f"VPC {p.vpc} does not exist in this account and region "
                              f"({inv.aws.region}; a VPC of another region is not visible here)")
             for p in plan_groups(inv, live.groups)]
    ids = {p.name: p.group_id for p in plans if p.group_id}
    group_vpcs = {p.name: p.vpc for p in plans}
    attachments = plan_attachments(inv, live.instances, ids, group_vpcs)
    doomed = dropped(live.groups, plans, vpcs(inv))
    machine_of = {a.instance: a.machine for a in attachments if a.instance}
    deletions = plan_deletions(doomed, live.interfaces, live.referencing, plans, attachments, machine_of)
    names = {gid: name for i in live.instances for gid, name in i.group_names if name}
    names.update({g.id: g.name for g in (*live.groups, *live.referencing)})
    names.update({gid: name for name, gid in ids.items()})
    placements = plan_placements(inv, live.placements, live.instances, attachments)
    return SgPlan(tuple(plans), tuple(attachments), tuple(deletions), (),
                  guard(plans, live.groups, deletions), names, live.groups, tuple(placements))
