"""Which groups each EC2 instance's primary network interface carries. Pure, no I/O.

A machine with an `aws:` block names its instance by id, or is found by its private
address in the VPC of its groups. `sg apply` makes the primary interface (device index 0)
carry exactly the machine's `security_groups` plus its `aws.keep_groups`: a group dropped
from the inventory is detached, a group added is attached, order does not matter.
Machines without an `aws:` block are never touched (their `security_groups` only feed
`check` and `audit`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from provision.frozen import frozen
from provision.inventory.model import Host, Inventory

from .rules import PENDING


@frozen
class LiveInstance:
    id: str
    vpc: str
    private_address: str
    eni: str  # the primary network interface ("" when AWS shows none)
    groups: tuple[str, ...]  # group ids on that interface
    state: str = ""
    group_names: tuple[tuple[str, str], ...] = ()  # (id, name) of those groups, for display
    placement_group: str = ""  # the placement group it is in ("" for none)


@frozen
class AttachPlan:
    machine: str
    instance: str  # "" when not found
    eni: str
    current: tuple[str, ...]
    want: tuple[str, ...]  # group ids, or sg:NAME for a group created by this apply
    error: str = ""

    @property
    def has_changes(self) -> bool:
        return not self.error and set(self.current) != set(self.want)

    @property
    def attach(self) -> tuple[str, ...]:
        return tuple(g for g in self.want if g not in self.current)

    @property
    def detach(self) -> tuple[str, ...]:
        return tuple(g for g in self.current if g not in self.want)


def live_instances(reservations: Iterable[Mapping[str, Any]]) -> list[LiveInstance]:
    """describe_instances `Reservations` (all pages) as LiveInstances."""
    out = []
    for res in reservations:
        for i in res.get("Instances", []):
            primary = next((n for n in i.get("NetworkInterfaces", [])
                            if n.get("Attachment", {}).get("DeviceIndex") == 0), None)
            groups = (primary or {}).get("Groups", i.get("SecurityGroups", []))
            out.append(LiveInstance(
                str(i.get("InstanceId", "")), str(i.get("VpcId", "")), str(i.get("PrivateIpAddress", "")),
                str((primary or {}).get("NetworkInterfaceId", "")),
                tuple(str(g.get("GroupId", "")) for g in groups),
                str(i.get("State", {}).get("Name", "")),
                tuple((str(g.get("GroupId", "")), str(g.get("GroupName", ""))) for g in groups),
                str(i.get("Placement", {}).get("GroupName", "") or "")))
    return out


def machines(inv: Inventory) -> list[Host]:
    """The machines whose groups `sg apply` attaches (those with an `aws:` block)."""
    return [n for n in (*inv.bastions, *inv.hosts) if n.instance is not None]


def _find(node: Host, vpc: str | None, live: Sequence[LiveInstance]) -> LiveInstance | str:
    assert node.instance is not None
    gone = ("terminated", "shutting-down")
    if node.instance.id is not None:
        hit = next((i for i in live if i.id == node.instance.id and i.state not in gone), None)
        if hit is None:
            return f"instance {node.instance.id} does not exist in this account and region"
        if vpc and hit.vpc != vpc:
            return f"instance {hit.id} is in {hit.vpc}, its security groups in {vpc}"
        return hit
    if vpc is None:
        return "its groups name no VPC to find it by private address in: give aws.instance_id"
    hits = [i for i in live if i.private_address == node.instance.private_address
            and i.vpc == vpc and i.state not in gone]
    if not hits:
        return f"no instance with private address {node.instance.private_address} in {vpc}"
    if len(hits) > 1:
        return (f"{len(hits)} instances have private address {node.instance.private_address} "
                f"in {vpc} ({', '.join(i.id for i in hits)}): give aws.instance_id")
    return hits[0]


def plan_attachments(inv: Inventory, live: Sequence[LiveInstance], ids: Mapping[str, str],
                     vpcs: Mapping[str, str | None]) -> list[AttachPlan]:
    """One AttachPlan per machine with an `aws:` block. `ids` maps group names to their ids
    (where they exist), `vpcs` group names to their VPCs."""
    out = []
    for node in machines(inv):
        assert node.instance is not None
        in_vpcs = sorted({v for g in node.security_groups if (v := vpcs.get(g))})
        want = tuple(dict.fromkeys([ids.get(g) or PENDING + g for g in node.security_groups]
                                   + list(node.instance.keep_groups)))
        if len(in_vpcs) > 1:
            out.append(AttachPlan(node.name, "", "", (), want,
                                  error=f"its groups are in different VPCs ({', '.join(in_vpcs)})"))
            continue
        found = _find(node, in_vpcs[0] if in_vpcs else None, live)
        if isinstance(found, str):
            out.append(AttachPlan(node.name, "", "", (), want, error=found))
        elif not found.eni:
            out.append(AttachPlan(node.name, found.id, "", found.groups, want,
                                  error=f"instance {found.id} has no primary network interface"))
        else:
            out.append(AttachPlan(node.name, found.id, found.eni, found.groups, want))
    return _claimed_once(out)


def _claimed_once(plans: list[AttachPlan]) -> list[AttachPlan]:
    """Two machines that find the same instance (one by id, one by address: the inventory
    refuses the same id or address twice at load) would each set its groups, the second
    undoing the first: every such plan fails, naming the others."""
    by_instance: dict[str, list[str]] = {}
    for a in plans:
        if a.instance:
            by_instance.setdefault(a.instance, []).append(a.machine)
    out = []
    for a in plans:
        others = [m for m in by_instance.get(a.instance, []) if m != a.machine] if a.instance else []
        if others and not a.error:
            a = replace(a, error=f"instance {a.instance} is also the instance of "
                                 f"{', '.join(others)}: one EC2 instance is one machine; "
                                 "name each machine's own instance in its aws block")
        out.append(a)
    return out


def group_text(gid: str, names: Mapping[str, str]) -> str:
    if gid.startswith(PENDING):
        return f"{gid[len(PENDING):]} (to be created)"
    name = names.get(gid)
    return f"{name} ({gid})" if name else gid
