"""Live security groups as inventory YAML (`provision import sg`). Pure, no I/O.

The output is what `sg plan` reads back as exactly the live rules, so a plan right after
adopting shows no changes: each group is declared by its `id` (and VPC), each rule is the
inverse of `rules.declared_key` (the one normalisation the reconcile uses), rules that
differ only in their peer are written as one rule with several sources, and a referenced
group is written by its (inventory) name. An egress that is only the AWS default is left
out (`sg` then leaves it alone).

What the inventory cannot express is skipped with a warning rather than approximated
(an approximation would be a change at the next apply): prefix lists, ICMP type-specific
rules, tcp/udp "all ports" (ports start at 1 in the inventory), other protocol numbers,
a group in another account, descriptions with characters the inventory refuses. A skipped
rule of a group provision does not manage is reported as drift by `sg plan`, never
removed; in a managed group it would be revoked, so the warning says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from provision.record import record

from .rules import DEFAULT_EGRESS, PENDING, LiveGroup, LiveRule, rule_text

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_TEXT_OK = re.compile(r"^[A-Za-z0-9 ._\-:/()#,@+=&;\[\]{}!$*]{0,255}$")  # schema's Description
_GROUP_ID = re.compile(r"^sg-[0-9a-f]{8,17}$")
_VPC_ID = re.compile(r"^vpc-[0-9a-f]{1,17}$")


@record
class Adopted:
    doc: dict[str, Any]  # a whole inventory: version, aws.region, aws.security_groups
    warnings: tuple[str, ...]


def inventory_names(groups: Sequence[LiveGroup]) -> dict[str, str]:
    """Group id -> a unique inventory name (the AWS name where the inventory allows it)."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for g in sorted(groups, key=lambda g: (g.name, g.id)):
        base = g.name if _NAME_OK.match(g.name) else (re.sub(r"[^A-Za-z0-9._-]+", "-", g.name).strip("-._")
                                                     or "group")[:40]
        name = base if base not in taken else f"{base[:40]}-{g.id.removeprefix('sg-')}"
        n = 1
        while name in taken:  # a live group may already be named like the suffixed form
            n += 1
            name = f"{base[:40]}-{g.id.removeprefix('sg-')}-{n}"
        taken.add(name)
        out[g.id] = name
    return out


def _rule_shape(rule: LiveRule, names: Mapping[str, str]) -> tuple[tuple[Any, ...], str] | str:
    """((protocol, port fields...), source) for a rule, or why it cannot be written."""
    k = rule.key
    if k.peer_kind == "prefix-list":
        return "a prefix list peer"
    if k.peer_kind == "group":
        if k.peer.startswith(PENDING) or k.peer not in names:
            return f"group {k.peer} is not among the imported groups (another account or VPC?)"
        source = names[k.peer]
    else:
        source = k.peer
    if not _TEXT_OK.match(rule.description):
        return "its description has characters the inventory does not allow"
    if k.protocol == "all":
        return ("all",), source
    if k.protocol in ("icmp", "icmpv6"):
        v6 = k.peer_kind == "cidr6"
        if (k.from_port, k.to_port) != (-1, -1):
            return "an ICMP type-specific rule (the inventory's icmp is every type)"
        if k.peer_kind != "group" and (k.protocol == "icmpv6") != v6:
            return f"{k.protocol} from an IPv{'6' if v6 else '4'} source"
        if k.peer_kind == "group" and k.protocol == "icmpv6":
            return "icmpv6 from a group (the inventory's icmp to a group is ICMPv4)"
        return ("icmp",), source
    if k.protocol in ("tcp", "udp"):
        if k.from_port < 1 or k.to_port > 65535 or k.from_port > k.to_port:
            return f"ports {k.from_port}-{k.to_port} (the inventory's ports are 1-65535)"
        return (k.protocol, k.from_port, k.to_port), source
    return f"protocol {k.protocol}"


def _rules(rules: Sequence[LiveRule], names: Mapping[str, str], peer_word: str,
           where: str, managed: bool, warnings: list[str]) -> list[dict[str, Any]]:
    grouped: dict[tuple[Any, ...], list[str]] = {}
    for r in rules:
        shape = _rule_shape(r, names)
        if isinstance(shape, str):
            fate = "sg apply would revoke it (the group is managed)" if managed else "sg plan shows it as drift"
            warnings.append(f"{where}: skipped {rule_text(r.key, names, r.description)} ({r.id}): "
                            f"{shape}; {fate}")
            continue
        (proto, *ports), source = shape
        grouped.setdefault((proto, *ports, r.description), []).append(source)
    out = []
    for (proto, *rest), sources in grouped.items():
        *ports, description = rest
        entry: dict[str, Any] = {}
        if proto != "tcp":
            entry["protocol"] = proto
        if ports:
            lo, hi = ports
            if lo == hi:
                entry["port"] = lo
            else:
                entry["ports"] = [lo, hi]
        entry[peer_word] = sources
        if description:
            entry["description"] = description
        out.append(entry)
    return out


def adopt(groups: Sequence[LiveGroup], region: str) -> Adopted:
    """The inventory that declares `groups` exactly as they are."""
    warnings: list[str] = []
    usable = [g for g in groups if _GROUP_ID.match(g.id) and _VPC_ID.match(g.vpc)]
    warnings += [f"skipped group {g.id}: not an id and VPC the inventory can name" for g in groups
                 if g not in usable]
    names = inventory_names(usable)
    declared: dict[str, Any] = {}
    for g in sorted(usable, key=lambda g: names[g.id]):
        name = names[g.id]
        entry: dict[str, Any] = {"id": g.id, "vpc": g.vpc}
        if _TEXT_OK.match(g.description) and g.description:
            entry["description"] = g.description
        entry["ingress"] = _rules([r for r in g.rules if not r.key.egress], names, "from",
                                  f"{name} ingress", g.managed, warnings)
        egress = [r for r in g.rules if r.key.egress]
        if [r.key for r in egress] != [DEFAULT_EGRESS]:
            entry["egress"] = _rules(egress, names, "to", f"{name} egress", g.managed, warnings)
        declared[name] = entry
    return Adopted({"version": 1, "aws": {"region": region, "security_groups": declared}},
                   tuple(warnings))
