"""The addresses a security group reference stands for, from the inventory. Pure.

A rule whose source is another group admits the machines attached to that group; the
inventory knows their addresses, so the cross-layer findings and `audit` judge such a rule
as those addresses: a bastion's `egress` (where its connections come from), a host's
instance private address, else its address when it is an IP.
"""

from __future__ import annotations

import ipaddress

from provision.inventory.model import Host, Inventory


def source_cidrs(node: Host) -> tuple[str, ...]:
    """Where `node`'s connections come from, as CIDRs (empty when not known)."""
    if node.is_bastion and node.egress:
        return node.egress
    for text in (node.instance.private_address if node.instance else None, node.address):
        try:
            return (str(ipaddress.ip_network(text or "")),)
        except ValueError:
            continue
    return ()


def group_name(inv: Inventory, peer: str) -> str | None:
    """The declared group `peer` stands for (a name, or the id of a group declared by id)."""
    if inv.aws is None:
        return None
    for g in inv.aws.security_groups:
        if peer in (g.name, g.id):
            return g.name
    return None


def group_members(inv: Inventory, peer: str) -> tuple[str, ...] | None:
    """The CIDRs of the machines attached to group `peer`; None when `peer` is no declared group."""
    name = group_name(inv, peer)
    if name is None:
        return None
    out: list[str] = []
    for n in (*inv.bastions, *inv.hosts):
        if name in n.security_groups:
            out += [c for c in source_cidrs(n) if c not in out]
    return tuple(out)
