"""Security group findings about `public_address` (NAT, an elastic IP). Pure.

`sg-source-public-address` (warning): a group's rule admits exactly a machine's public
address, and that machine sits in a group of the same VPC. Inside a VPC its connections
come from its private address, so the rule admits nothing of it there (the classic
elastic-IP mistake); what admits it is its group as the source, or its private address.
"""

from __future__ import annotations

import ipaddress

from provision.cloud import cluster_rules
from provision.finding import Finding
from provision.inventory.fields import is_cidr
from provision.inventory.model import Host, Inventory, SecurityGroup


def findings(inv: Inventory) -> list[Finding]:
    if inv.aws is None:
        return []
    groups = {g.name: g for g in inv.aws.security_groups}
    out: list[Finding] = []
    for g in inv.aws.security_groups:
        for i, rule in enumerate(cluster_rules.ingress(inv, g)):
            for src in rule.sources:
                if not is_cidr(src):
                    continue
                net = ipaddress.ip_network(src, strict=False)
                if net.num_addresses != 1:
                    continue  # a range may well mean more than this machine
                for node in _with_public(inv, str(net.network_address)):
                    if not _same_vpc(node, g, groups):
                        continue
                    sources = ", ".join(node.security_groups)
                    out.append(Finding(
                        "warning", "sg-source-public-address", f"sg/{g.name}",
                        f"security group {g.name} admits {src}, the public_address of "
                        f"{node.name}: inside the VPC {node.name}'s connections come from its "
                        "private address, so this rule admits nothing of it there",
                        f"use its group ({sources}) as the source, or its private address",
                        cluster_rules.field_of(inv, g, i)))
    return out


def _with_public(inv: Inventory, address: str) -> list[Host]:
    return [n for n in (*inv.bastions, *inv.hosts) if n.public_address is not None
            and ipaddress.ip_address(n.public_address) == ipaddress.ip_address(address)]


def _same_vpc(node: Host, g: SecurityGroup, groups: dict[str, SecurityGroup]) -> bool:
    return any(groups[n].vpc is not None and groups[n].vpc == g.vpc
               for n in node.security_groups if n in groups)
