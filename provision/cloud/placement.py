"""A cluster's AWS placement group (strategy `cluster`): create it when missing, report the
members whose instances are not in it. Pure, no I/O.

`sg plan` shows "create placement group NAME (cluster)" when AWS has no group of that name
(or only a deleted one) and `sg apply` creates it, tagged `managed-by: provision`. A group of
that name with another strategy, or one being deleted, stops the plan: provision does not
change or replace it. A member whose instance is in no placement group or another one is
reported and left alone: an instance changes placement group only while stopped
(`modify_instance_placement`), and stopping a training node is the operator's decision.
Clusters that share a placement group plan it once.

moto (5.2) does not implement placement groups (`create_placement_group` raises
NotImplementedError and `run_instances` drops `Placement.GroupName`): the tests drive this
with botocore's Stubber and a fake of their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from provision.frozen import frozen
from provision.inventory.model import Inventory

from .attach import AttachPlan, LiveInstance

STRATEGY = "cluster"


@frozen
class LivePlacement:
    name: str
    strategy: str
    state: str  # pending, available, deleting, deleted
    id: str = ""


@frozen
class Outside:
    """A member whose instance is not in the cluster's placement group."""

    machine: str
    instance: str
    group: str  # the placement group it is in; "" for none

    @property
    def text(self) -> str:
        where = f"in placement group {self.group}" if self.group else "in no placement group"
        return (f"{self.machine} ({self.instance}) is {where}: moving a running instance "
                "needs a stop: not done")


@frozen
class PlacementPlan:
    name: str
    clusters: tuple[str, ...]
    create: bool
    outside: tuple[Outside, ...] = ()
    error: str = ""

    @property
    def has_changes(self) -> bool:
        return self.create and not self.error


def live_placements(groups: Iterable[Mapping[str, Any]]) -> list[LivePlacement]:
    """describe_placement_groups `PlacementGroups` as LivePlacements."""
    return [LivePlacement(str(g.get("GroupName", "")), str(g.get("Strategy", "")),
                          str(g.get("State", "")), str(g.get("GroupId", ""))) for g in groups]


def wanted(inv: Inventory) -> dict[str, tuple[str, ...]]:
    """Placement group name -> the clusters that name it (by cluster name)."""
    out: dict[str, list[str]] = {}
    for c in sorted(inv.clusters, key=lambda c: c.name):
        if c.placement_group is not None:
            out.setdefault(c.placement_group, []).append(c.name)
    return {name: tuple(cs) for name, cs in out.items()}


def plan_placements(inv: Inventory, live: Sequence[LivePlacement], instances: Sequence[LiveInstance],
                    attachments: Sequence[AttachPlan]) -> list[PlacementPlan]:
    """The placement groups the clusters name, against what AWS has. Pure."""
    by_id = {i.id: i for i in instances}
    instance_of = {a.machine: a.instance for a in attachments if a.instance}
    out = []
    for name, clusters in wanted(inv).items():
        found = next((g for g in live if g.name == name and g.state != "deleted"), None)
        if found is not None and found.state == "deleting":
            out.append(PlacementPlan(name, clusters, False, error=f"placement group {name} is being "
                                     "deleted: wait until it is gone, then plan again"))
            continue
        if found is not None and found.strategy != STRATEGY:
            out.append(PlacementPlan(name, clusters, False, error=f"placement group {name} exists with "
                                     f"strategy {found.strategy}, not {STRATEGY}: provision does not "
                                     "change it; name another group or delete it"))
            continue
        members = dict.fromkeys(m for c in inv.clusters if c.name in clusters for m in c.members)
        outside = []
        for m in members:
            inst = by_id.get(instance_of.get(m, ""))
            if inst is not None and inst.placement_group != name:
                outside.append(Outside(m, inst.id, inst.placement_group))
        out.append(PlacementPlan(name, clusters, found is None, tuple(outside)))
    return out
