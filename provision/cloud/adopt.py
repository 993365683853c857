"""Live security groups as inventory YAML (`provision import sg`). Pure, no I/O.

The output is what `sg plan` reads back as exactly the live rules, so a plan right after
adopting shows no changes: each group is declared by its `id` (and VPC), each rule is the
inverse of `rules.declared_key` (the one normalisation the reconcile uses), rules that
differ only in their peer are written as one rule with several sources, and a referenced
group is written by its (inventory) name, never one that reads as a CIDR (a group named
`203.0.113.7` becomes `group-203.0.113.7`: as a source, `203.0.113.7` is the address).
An egress that is only the AWS default is left out (`sg` then leaves it alone).
`provision.cloud.readback` then checks that claim on the YAML itself.

What the inventory cannot express is never approximated (an approximation would be a
change at the next apply). A rule of a group provision does not manage is left out and
listed in `skipped` (prefix lists, ICMP type-specific rules, tcp/udp "all ports" (ports
start at 1 in the inventory), other protocol numbers, a group in another account, a CIDR
or description the inventory refuses): `sg plan` reports it as drift and never removes
it. Anything else that cannot be written is in `refused`, and nothing may be written: such
a rule of a managed group (the adopted inventory would revoke it), a group description or
id the inventory refuses. (Two live rules that read as one are found by the read-back.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from provision.frozen import frozen
from provision.inventory.fields import check_cidr, check_name, is_cidr
from provision.text import printable

from .rules import DEFAULT_EGRESS, PENDING, LiveGroup, LiveRule, rule_text

# the schema's Description (provision.inventory.schema), matched whole: `$` would let a
# final newline through
_TEXT_OK = re.compile(r"[A-Za-z0-9 ._\-:/()#,@+=&;\[\]{}!$*]{0,255}")
_GROUP_ID = re.compile(r"sg-[0-9a-f]{8,17}")
_VPC_ID = re.compile(r"vpc-[0-9a-f]{1,17}")


@frozen
class Skipped:
    """A rule of a group provision does not manage that the inventory cannot express:
    left out, so AWS keeps it and `sg plan` shows it as drift."""

    group_id: str
    group: str  # inventory name
    rule: LiveRule
    why: str

    def text(self, names: Mapping[str, str]) -> str:
        direction = "egress" if self.rule.key.egress else "ingress"
        return (f"{self.group} {direction}: skipped {rule_text(self.rule.key, names, self.rule.description)} "
                f"({self.rule.id}): {self.why}; sg plan shows it as drift")


@frozen
class Adopted:
    doc: dict[str, Any]  # a whole inventory: version, aws.region, aws.security_groups
    names: dict[str, str]  # group id -> inventory name
    skipped: tuple[Skipped, ...] = ()
    refused: tuple[str, ...] = ()  # what cannot be written: nothing may be

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(s.text(self.names) for s in self.skipped)


def _name_ok(name: str) -> bool:
    """A name the inventory takes for a group, and reads back as that group in a rule."""
    try:
        check_name(name)
    except ValueError:
        return False
    return not is_cidr(name)


def inventory_names(groups: Sequence[LiveGroup]) -> dict[str, str]:
    """Group id -> a unique inventory name (the AWS name where the inventory allows it)."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for g in sorted(groups, key=lambda g: (g.name, g.id)):
        if _name_ok(g.name):
            base = g.name
        else:
            base = (re.sub(r"[^A-Za-z0-9._-]+", "-", g.name).strip("-._") or "group")[:40]
            if not _name_ok(base):  # an address (203.0.113.7) is a CIDR as a rule's source
                base = f"group-{base}"[:40]
        name = base if base not in taken else f"{base[:40]}-{g.id.removeprefix('sg-')}"
        n = 1
        while name in taken:  # a live group may already be named like the suffixed form
            n += 1
            name = f"{base[:40]}-{g.id.removeprefix('sg-')}-{n}"
        taken.add(name)
        out[g.id] = name
    return out


def _cidr_ok(peer: str) -> bool:
    try:
        return check_cidr(peer) == peer
    except ValueError:
        return False


def _rule_shape(rule: LiveRule, names: Mapping[str, str]) -> tuple[tuple[Any, ...], str] | str:
    """((protocol, port fields...), source) for a rule, or why it cannot be written."""
    k = rule.key
    if k.peer_kind == "prefix-list":
        return "a prefix list peer"
    if k.peer_kind == "group":
        if k.peer.startswith(PENDING) or k.peer not in names:
            return f"group {k.peer} is not among the imported groups (another account or VPC?)"
        source = names[k.peer]
    elif not _cidr_ok(k.peer):
        return "a CIDR the inventory does not allow"
    else:
        source = k.peer
    if not _TEXT_OK.fullmatch(rule.description):
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


def _rules(g: LiveGroup, egress: bool, names: Mapping[str, str], aws_names: Mapping[str, str],
           skipped: list[Skipped], refused: list[str]) -> list[dict[str, Any]]:
    name = names[g.id]
    grouped: dict[tuple[Any, ...], list[str]] = {}
    for r in (r for r in g.rules if r.key.egress == egress):
        shape = _rule_shape(r, names)
        if isinstance(shape, str):
            if g.managed:
                refused.append(f"group {g.name} ({g.id}): {rule_text(r.key, aws_names, r.description)} "
                               f"({r.id}) cannot be written ({shape}), and the group is tagged "
                               "managed-by: provision, so the adopted inventory would revoke it")
            else:
                skipped.append(Skipped(g.id, name, r, shape))
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
        entry["to" if egress else "from"] = sources
        if description:
            entry["description"] = description
        out.append(entry)
    return out


def adopt(groups: Sequence[LiveGroup], region: str) -> Adopted:
    """The inventory that declares `groups` exactly as they are (see `refused`)."""
    refused = [f"group {g.id} ({g.name}, VPC {g.vpc or 'none'}): not a group id and VPC id the "
               "inventory can declare" for g in groups
               if not (_GROUP_ID.fullmatch(g.id) and _VPC_ID.fullmatch(g.vpc))]
    usable = [g for g in groups if _GROUP_ID.fullmatch(g.id) and _VPC_ID.fullmatch(g.vpc)]
    names = inventory_names(usable)
    aws_names = {g.id: g.name for g in groups}  # for the refusals: nothing is written
    skipped: list[Skipped] = []
    declared: dict[str, Any] = {}
    for g in sorted(usable, key=lambda g: names[g.id]):
        name = names[g.id]
        entry: dict[str, Any] = {"id": g.id, "vpc": g.vpc}
        if _TEXT_OK.fullmatch(g.description):
            entry["description"] = g.description
        else:
            refused.append(f"group {g.name} ({g.id}): its description {g.description!r} has characters "
                           "the inventory does not allow (at most 255 letters, digits, spaces "
                           "and ._-:/()#,@[]+=&;{}!$*)")
        entry["ingress"] = _rules(g, False, names, aws_names, skipped, refused)
        if [r.key for r in g.rules if r.key.egress] != [DEFAULT_EGRESS]:
            entry["egress"] = _rules(g, True, names, aws_names, skipped, refused)
        declared[name] = entry
    return Adopted({"version": 1, "aws": {"region": region, "security_groups": declared}},
                   names, tuple(skipped), tuple(refused))


def render(adopted: Adopted) -> str:
    """The YAML `import sg` writes: the skipped rules as comments first, so the file
    itself says what it leaves out."""
    lines = [f"# {_comment(w)}" for w in adopted.warnings]
    if lines:
        lines.insert(0, "# left out (AWS keeps them; sg plan shows them as drift):")
    body = yaml.safe_dump(adopted.doc, sort_keys=False, allow_unicode=False)
    return "".join(f"{line}\n" for line in lines) + body


def _comment(text: str) -> str:
    """`text` safe inside a YAML comment: escaped, and ASCII (YAML also ends a line at
    U+0085, U+2028 and U+2029)."""
    return printable(text).encode("ascii", "backslashreplace").decode("ascii")
