"""Clusters joined with the security groups and the bastions (pure): what `check` and
`audit` say about a cluster's cloud half.

- A security group rule whose source is a group admits the machines attached to that
  group. On a machine in a cluster, the host firewall admits its fellow members on the
  cluster's ports (`firewall.rules.cluster_rules`), so such a rule serves them: `served`
  tells `cloud.py` not to call it a rule the host drops. A group wider than the cluster's
  ports is not a finding: the host firewall is the narrower layer, by design.
- `sg-peer-outside-cluster` (warning): the rule admits machines that share no cluster with
  this one; its firewall drops them (a training job with them hangs), naming them and the
  rule.
- `cluster-sg-drops-members` (error): two members of a cluster are both in security groups,
  and the first's groups do not admit the second on the cluster's protocols and ports: the
  cloud drops what the host firewall opens, and a job hangs at the rendezvous or in NCCL.
- `cluster-crosses-sites` (warning): the members are behind different bastions (different
  sites, as far as the inventory says): their training traffic crosses between them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

from provision.cloud import cluster_rules
from provision.finding import Finding
from provision.inventory.fields import is_cidr
from provision.inventory.model import Cluster, Host, IngressRule, Inventory

from .members import group_name

Span = tuple[int, int]
EVERY_PORT: Span = (1, 65535)


def _spans(c: Cluster) -> tuple[Span, ...]:
    return c.ports or (EVERY_PORT,)


def _rule_span(rule: IngressRule) -> Span:
    return EVERY_PORT if rule.protocol == "all" else (rule.from_port, rule.to_port)


def _protocols(rule: IngressRule) -> tuple[str, ...]:
    return ("tcp", "udp") if rule.protocol == "all" else (rule.protocol,)


def shared(inv: Inventory, a: str, b: str) -> list[Cluster]:
    """The clusters `a` and `b` are both members of."""
    return [c for c in inv.clusters_of(a) if b in c.members]


def attached(inv: Inventory, group: str) -> list[Host]:
    """The machines in declared group `group` (a name or the id of a group declared by id)."""
    name = group_name(inv, group)
    return [n for n in (*inv.bastions, *inv.hosts) if name is not None and name in n.security_groups]


def _uses(c: Cluster, rule: IngressRule) -> bool:
    """Whether the cluster's members talk on something the rule admits."""
    lo, hi = _rule_span(rule)
    return any(p in c.protocols for p in _protocols(rule)) and any(
        s[0] <= hi and lo <= s[1] for s in _spans(c))


def peers(inv: Inventory, node: Host, rule: IngressRule) -> tuple[list[str], list[str]] | None:
    """For a rule whose sources are all declared groups: (the machines it admits that share
    a cluster with `node` using what it admits, the others); None for any other rule."""
    if not rule.sources or any(is_cidr(s) or group_name(inv, s) is None for s in rule.sources):
        return None
    machines = dict.fromkeys(n.name for s in rule.sources for n in attached(inv, s) if n.name != node.name)
    inside = [m for m in machines if any(_uses(c, rule) for c in shared(inv, node.name, m))]
    return inside, [m for m in machines if m not in inside]


def served(inv: Inventory, node: Host, rule: IngressRule) -> bool:
    """Whether the rule admits only fellow cluster members of `node`, which its firewall
    admits: nothing it admits is dropped for want of a listener."""
    found = peers(inv, node, rule)
    return found is not None and bool(found[0]) and not found[1]


def outside(inv: Inventory, node: Host, rule: IngressRule, group: str, field: str) -> list[Finding]:
    """`sg-peer-outside-cluster` for a group rule admitting machines `node` shares no cluster
    with, when it admits every port (the training pattern) or some machines are members."""
    found = peers(inv, node, rule)
    if found is None or not found[1] or (not found[0] and rule.protocol != "all"):
        return []
    inside, strangers = found
    what = "all traffic" if rule.protocol == "all" else f"{rule.protocol} {rule.from_port}-{rule.to_port}"
    src = ", ".join(rule.sources)
    also = f" (its cluster peers there: {', '.join(inside)})" if inside else ""
    return [Finding(
        "warning", "sg-peer-outside-cluster", node.name,
        f"security group {group} admits {what} from {src}, which holds {', '.join(strangers)}, "
        f"but {node.name}'s firewall drops {'it' if len(strangers) == 1 else 'them'}: "
        f"{node.name} shares no cluster with {', '.join(strangers)}{also}",
        f"put {node.name} and {', '.join(strangers)} in one cluster (clusters:, with "
        f"security_group: {group}) if they train together, else keep them out of {src}", field)]


# --- a cluster's members at the cloud layer ----------------------------------------------

def _covers(cidrs: Iterable[str], addresses: Sequence[str]) -> bool:
    nets = [ipaddress.ip_network(c) for c in cidrs]
    return bool(addresses) and all(
        any(ipaddress.ip_network(a).version == n.version
            and ipaddress.ip_network(a).subnet_of(n) for n in nets)  # type: ignore[arg-type]
        for a in addresses)


def _admits(inv: Inventory, rule: IngressRule, peer: Host, addresses: Sequence[str]) -> bool:
    """Whether the rule's sources take in `peer` (a group it is in, or CIDRs covering it)."""
    groups = {group_name(inv, s) for s in rule.sources if not is_cidr(s)}
    if any(g in peer.security_groups for g in groups if g):
        return True
    return _covers([s for s in rule.sources if is_cidr(s)], addresses)


def _minus(spans: Sequence[Span], taken: Sequence[Span]) -> list[Span]:
    out = list(spans)
    for lo, hi in taken:
        nxt: list[Span] = []
        for a, b in out:
            if hi < a or b < lo:
                nxt.append((a, b))
                continue
            if a < lo:
                nxt.append((a, lo - 1))
            if hi < b:
                nxt.append((hi + 1, b))
        out = nxt
    return out


def _span_text(proto: str, s: Span) -> str:
    return f"{proto} {s[0]}" if s[0] == s[1] else f"{proto} {s[0]}-{s[1]}"


def dropped(inv: Inventory, c: Cluster, member: Host, peer: Host) -> list[str]:
    """What of the cluster's traffic from `peer` the security groups of `member` drop."""
    assert inv.aws is not None
    groups = [g for g in inv.aws.security_groups if g.name in member.security_groups]
    rules = [r for g in groups for r in cluster_rules.ingress(inv, g)]
    addresses = [a for a in c.addresses_of(peer.name) if ipaddress.ip_address(a).version == c.family]
    out = []
    for proto in c.protocols:
        taken = [_rule_span(r) for r in rules if proto in _protocols(r) and _admits(inv, r, peer, addresses)]
        out += [_span_text(proto, s) for s in _minus(_spans(c), taken)]
    return out


def _cloud(inv: Inventory, c: Cluster) -> list[Finding]:
    if inv.aws is None:
        return []
    nodes = [inv.node(m) for m in c.members]
    in_aws = [n for n in nodes if n.security_groups]
    out = []
    for member in in_aws:
        lost = {p.name: d for p in in_aws if p is not member and (d := dropped(inv, c, member, p))}
        if not lost:
            continue
        what = "; ".join(f"{', '.join(d)} from {p}" for p, d in lost.items())
        out.append(Finding(
            "error", "cluster-sg-drops-members", f"{member.name}",
            f"cluster {c.name}: the security groups of {member.name} "
            f"({', '.join(member.security_groups)}) drop {what}: the host firewall admits it, "
            "the cloud does not, and a job hangs",
            f"name the members' shared group in clusters.{c.name}.security_group (sg apply adds "
            "its all-traffic rule from itself), or admit them in aws.security_groups",
            f"clusters.{c.name}.hosts"))
    return out


def _sites(inv: Inventory, c: Cluster) -> list[Finding]:
    by_site: dict[str, list[str]] = {}
    for m in c.members:
        chain = inv.node(m).jump_chain
        by_site.setdefault(chain[-1] if chain else "", []).append(m)
    if len(by_site) < 2:
        return []
    text = "; ".join(f"{', '.join(ms)} {'behind ' + b if b else 'reached directly'}"
                     for b, ms in sorted(by_site.items()))
    return [Finding(
        "warning", "cluster-crosses-sites", f"cluster {c.name}",
        f"cluster {c.name}'s members are behind different bastions ({text}): its training "
        "traffic crosses sites, over links slower than a site's own",
        "keep a cluster's members on one site (behind one bastion), or split it in two",
        f"clusters.{c.name}.hosts")]


def findings(inv: Inventory) -> list[Finding]:
    out: list[Finding] = []
    for c in inv.clusters:
        out += _cloud(inv, c)
        out += _sites(inv, c)
    return out
