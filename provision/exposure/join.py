"""The port join of `provision audit` (pure): per port, bind address x live host firewall
verdict (IPv4 and IPv6 separately, `provision.firewall.verdict.admitted`) x attached
security groups x tunnel, in one class:

    nowhere < host < jump < declared < undeclared < internet

`nowhere`: nothing listens; `host`: loopback only, or the firewall admits no source;
`jump`: only the egress of the bastion in front of the host; `declared`: only sources the
inventory declares for that port; `undeclared`: other CIDRs; `internet`: the union covers the
internet (`covers_internet`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from provision.cloud import cluster_rules
from provision.facts import Facts
from provision.facts import listeners as L
from provision.facts import sshd_effective as SSHD
from provision.firewall import parse as FP
from provision.firewall import verdict as FV
from provision.firewall.rules import Family, cluster_sources, ssh_sources
from provision.frozen import frozen
from provision.inventory.model import Host, Inventory, Service

from .internet import covers_internet
from .members import group_members

LEVELS = ("nowhere", "host", "jump", "declared", "undeclared", "internet")


@frozen
class SgRule:
    """One ingress rule of an attached security group, reduced to what the join needs."""

    group: str
    protocol: str  # tcp | udp | icmp | all | ...
    from_port: int
    to_port: int
    peer: str  # a CIDR, or a group (a declared group's name, or an id)
    # a group peer: the addresses of the machines attached to it (`members.py`)
    members: tuple[str, ...] = ()
    declared: bool = True  # False: a group id the inventory does not declare (shown as such)

    def admits(self, proto: str, port: int) -> bool:
        if self.protocol == "all":
            return True
        return self.protocol == proto and self.from_port <= port <= self.to_port

    @property
    def is_cidr(self) -> bool:
        return "/" in self.peer


def sg_rule(inv: Inventory, group: str, protocol: str, from_port: int, to_port: int, peer: str,
            names: Mapping[str, str] | None = None) -> SgRule:
    """An SgRule; a group peer (a name, or an id that `names` maps to a name) carries the
    addresses of its machines."""
    if "/" in peer:
        return SgRule(group, protocol, from_port, to_port, peer)
    peer = (names or {}).get(peer, peer)
    members = group_members(inv, peer)
    return SgRule(group, protocol, from_port, to_port, peer, members or (), members is not None)


def declared_sg_rules(inv: Inventory, host: Host) -> tuple[SgRule, ...] | None:
    """The inventory's rules for the groups attached to `host` (with the ones its clusters
    add); None when it has none."""
    if inv.aws is None or not host.security_groups:
        return None
    groups = {g.name: g for g in inv.aws.security_groups}
    return tuple(sg_rule(inv, name, r.protocol, r.from_port, r.to_port, src)
                 for name in host.security_groups if name in groups
                 for r in cluster_rules.ingress(inv, groups[name]) for src in r.sources)


@frozen
class Side:
    """One address family of a port."""

    bound: bool  # something listens on a non-loopback address of this family
    sources: tuple[str, ...]  # CIDRs the host firewall (and attached groups) let in
    level: str


@frozen
class PortReach:
    proto: str
    port: int
    listeners: tuple[str, ...]  # endpoints, e.g. 0.0.0.0:22, [::]:22
    process: str
    declared: str  # "ssh", "service NAME", or ""
    v4: Side
    v6: Side
    sg: str  # "", or what the attached groups admit ("not admitted", "10.0.0.0/8, sg:web")
    tunnel: bool  # the team reaches it with `provision tunnel`
    level: str

    def to_json(self) -> dict[str, Any]:
        return {"proto": self.proto, "port": self.port, "listeners": list(self.listeners),
                "process": self.process, "declared": self.declared or None,
                "v4": {"bound": self.v4.bound, "sources": list(self.v4.sources), "reach": self.v4.level},
                "v6": {"bound": self.v6.bound, "sources": list(self.v6.sources), "reach": self.v6.level},
                "security_groups": self.sg or None, "tunnel": self.tunnel, "reach": self.level}




@frozen
class Want:
    """A declared TCP port: sshd or a service."""

    label: str
    bind: str | None  # None: sshd (any address)
    sources: tuple[str, ...]  # what the inventory lets in
    service: Service | None = None


def wanted_ports(inv: Inventory, host: Host) -> dict[int, list[Want]]:
    out: dict[int, list[Want]] = {host.port: [Want("ssh", None, ssh_sources(inv, host))]}
    for s in host.services:
        srcs = s.expose.sources if s.expose.kind == "public" else ()
        if s.https is not None:  # the world reaches the door; the service only on loopback
            out.setdefault(s.https.port, []).append(Want(f"the door of {s.name}", None, srcs))
            srcs = ()
        out.setdefault(s.port, []).append(Want(f"service {s.name}", s.bind, srcs, s))
    return out


def reach_level(space: FV.AddressSet, bound: bool, jump: FV.AddressSet, declared: FV.AddressSet) -> str:
    if not bound:
        return "nowhere"
    if not space:
        return "host"
    if covers_internet(space.cidrs()):
        return "internet"
    if space.issubset(jump):
        return "jump"
    if space.issubset(declared | jump):
        return "declared"
    return "undeclared"


def _max(*levels: str) -> str:
    return max(levels, key=LEVELS.index)


def sg_space(rules: Sequence[SgRule] | None, proto: str, port: int, family: Family) -> FV.AddressSet:
    if rules is None:
        return FV.AddressSet.everything(family)
    return FV.AddressSet.of(family, [c for r in rules if r.admits(proto, port)
                                     for c in ((r.peer,) if r.is_cidr else r.members)])


def _sg_text(rules: Sequence[SgRule] | None, proto: str, port: int) -> str:
    if rules is None:
        return ""
    peers = [r.peer if r.is_cidr else f"sg:{r.peer}" if r.declared
             else f"sg:{r.peer} (not declared)" for r in rules if r.admits(proto, port)]
    return ", ".join(dict.fromkeys(peers)) or "not admitted"




def join_ports(inv: Inventory, host: Host, listeners: Sequence[L.Listener],
           lives: Mapping[int, FP.LiveFilter | None], sg_rules: Sequence[SgRule] | None,
           facts: Facts) -> list[PortReach]:
    wanted = wanted_ports(inv, host)
    chain = inv.chain(host)
    egress = chain[-1].egress if chain else ()
    sshd_fwd = facts.get(SSHD.SPEC).get("allowtcpforwarding") or "yes"
    keys = sorted({(s.proto, s.port) for s in listeners} | {("tcp", p) for p in wanted})
    out = []
    for proto, port in keys:
        here = [s for s in listeners if (s.proto, s.port) == (proto, port)]
        wants = wanted.get(port, []) if proto == "tcp" else []
        # a cluster's peers are declared sources of every port the cluster opens
        declared_srcs = (*(c for w in wants for c in w.sources),
                         *cluster_sources(inv, host, proto, port))
        sides: dict[int, Side] = {}
        fams: tuple[Family, ...] = (4, 6)
        for fam in fams:
            bound = any(fam in s.families and not s.is_loopback for s in here)
            live = lives.get(fam)
            space = (FV.admitted(live, FV.Packet(proto, port)) if live is not None
                     else FV.AddressSet.everything(fam))
            space = space & sg_space(sg_rules, proto, port, fam)
            if not bound:
                space = FV.AddressSet(fam)
            level = reach_level(space, bound, FV.AddressSet.of(fam, egress),
                           FV.AddressSet.of(fam, declared_srcs))
            if level == "nowhere" and any(fam in s.families for s in here):
                level = "host"
            sides[fam] = Side(bound, space.cidrs(), level)
        svc = next((w.service for w in wants if w.service is not None), None)
        tunnel = (svc is not None and svc.expose.kind == "tunnel" and bool(here)
                  and sshd_fwd in ("yes", "local", "all"))
        out.append(PortReach(
            proto, port, tuple(s.endpoint for s in here),
            ", ".join(dict.fromkeys(s.process for s in here if s.process)),
            ", ".join(w.label for w in wants), sides[4], sides[6], _sg_text(sg_rules, proto, port),
            tunnel, _max(sides[4].level, sides[6].level)))
    return out


def reachable_from(p: PortReach) -> str:
    parts = []
    for fam, side in ((4, p.v4), (6, p.v6)):
        if side.sources:
            shown = ", ".join(side.sources[:4]) + (" ..." if len(side.sources) > 4 else "")
            parts.append(f"IPv{fam} from {shown}")
    return "; ".join(parts) or "no source (the firewall drops it)"
