"""The security group rules a cluster implies (pure).

A cluster that names `security_group` (the group all its members are in, checked at load)
needs that group to admit all traffic from itself (AWS's training pattern: NCCL and Gloo
connect on ports the kernel picks), and with `efa: true` the matching all-traffic egress
rule to itself too (EFA's traffic is checked against the group on the way out as well).
provision adds these rules to the group's desired state instead of asking for them in
`aws.security_groups`: `sg plan` shows them with the description `cluster NAME: ...`, `sg
apply` authorizes them, and `check`/`audit` judge the group with them. A rule the inventory
declares itself with the same protocol, ports and peer is that rule: the declared one (and
its description) wins.

The egress rule is added even to a group whose `egress` the inventory leaves out (AWS's
default all-out rule stays and is still not managed): only the implied rule is compared.
"""

from __future__ import annotations

from provision.frozen import frozen
from provision.inventory.model import Cluster, IngressRule, Inventory, SecurityGroup


@frozen
class Implied:
    """One rule a cluster implies in its security group."""

    cluster: str
    group: str
    egress: bool
    rule: IngressRule


def ingress_rule(cluster: Cluster, group: str) -> IngressRule:
    return IngressRule("all", -1, -1, (group,), f"cluster {cluster.name}: its members admit each other")


def egress_rule(cluster: Cluster, group: str) -> IngressRule:
    return IngressRule("all", -1, -1, (group,), f"cluster {cluster.name}: EFA, all traffic to its members")


def implied(inv: Inventory) -> tuple[Implied, ...]:
    """Every rule the inventory's clusters imply, by cluster name (the first cluster's
    description wins when two clusters share a group)."""
    out: list[Implied] = []
    for c in sorted(inv.clusters, key=lambda c: c.name):
        g = c.security_group
        if g is None:
            continue
        out.append(Implied(c.name, g, False, ingress_rule(c, g)))
        if c.efa:
            out.append(Implied(c.name, g, True, egress_rule(c, g)))
    return tuple(out)


def _same(a: IngressRule, b: IngressRule) -> bool:
    return (a.protocol, a.from_port, a.to_port, a.sources) == (b.protocol, b.from_port, b.to_port, b.sources)


def extra(inv: Inventory, group: SecurityGroup) -> tuple[Implied, ...]:
    """The implied rules of `group` that it does not declare itself (one per rule)."""
    out: list[Implied] = []
    for i in implied(inv):
        if i.group != group.name:
            continue
        declared = (group.egress or ()) if i.egress else group.ingress
        if any(_same(i.rule, r) for r in declared) or any(
                o.egress == i.egress and _same(o.rule, i.rule) for o in out):
            continue
        out.append(i)
    return tuple(out)


def ingress(inv: Inventory, group: SecurityGroup) -> tuple[IngressRule, ...]:
    """The group's ingress as `sg apply` makes it: the declared rules, then the implied ones."""
    return (*group.ingress, *(i.rule for i in extra(inv, group) if not i.egress))


def field_of(inv: Inventory, group: SecurityGroup, index: int) -> str:
    """The inventory field a rule of `ingress(inv, group)` comes from (for file:line)."""
    if index < len(group.ingress):
        return f"aws.security_groups.{group.name}.ingress[{index}]"
    added = [i for i in extra(inv, group) if not i.egress]
    return f"clusters.{added[index - len(group.ingress)].cluster}.security_group"
