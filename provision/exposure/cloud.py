"""Cross-layer findings for AWS security groups: the cloud layer joined with the host firewall.

Pure: an Inventory in, findings out (no AWS call: this is what the inventory declares).
The host firewall's view is derived from the model the same way the renderer builds it:
a machine admits TCP on its SSH port from its bastion's egress and its `ssh_from`, TCP on
each public service's port from that service's sources, ICMP echo, and nothing else.

Findings:

- `sg-ssh-open-to-world` (warning), `sg-code-exec-public` (error): a group admits SSH, or
  Jupyter/TensorBoard, from sources whose union covers the internet — `0.0.0.0/0` or a
  disguise such as `0.0.0.0/1 + 128.0.0.0/1` or `2000::/3` (see `internet.py`).
- `sg-port-dropped-by-host` (warning): an attached group admits a port the host firewall
  drops (dead rule, or a firewall that is missing a service).
- `sg-public-service-unreachable` (error): a service declared public that the host
  firewall admits, but no attached group does, from some of its sources.
- `sg-admits-tunnel-service` (error): an attached group admits the port of a tunnel-only
  service: only the host firewall stands between it and those sources.

Machines that list no `security_groups` are not joined (they may not be in AWS at all).
A rule whose source is another declared group counts as the addresses of the machines
attached to it (`members.py`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from provision.cloud import cluster_rules
from provision.finding import Finding
from provision.inventory.fields import is_cidr
from provision.inventory.model import Host, IngressRule, Inventory, SecurityGroup

from . import clusters
from .internet import covers_internet
from .members import group_members

SSH_PORT = 22
CODE_PORTS = {8888: "Jupyter", 6006: "TensorBoard"}


def findings(inv: Inventory) -> list[Finding]:
    if inv.aws is None:
        return []
    groups = {g.name: g for g in inv.aws.security_groups}
    out: list[Finding] = []
    for g in inv.aws.security_groups:
        out += _open_to_internet(inv, g)
    for node in (*inv.bastions, *inv.hosts):
        attached = [groups[n] for n in node.security_groups if n in groups]
        if attached:
            out += _joined(inv, node, attached)
    return out


def _cidrs(rule: IngressRule, inv: Inventory) -> list[str]:
    """The rule's CIDR sources, and for a group source the addresses of its machines."""
    return [c for s in rule.sources for c in ((s,) if is_cidr(s) else group_members(inv, s) or ())]


def _members(inv: Inventory, group: str) -> list[Host]:
    return [n for n in (*inv.bastions, *inv.hosts) if group in n.security_groups]


def _open_to_internet(inv: Inventory, g: SecurityGroup) -> list[Finding]:
    members = _members(inv, g.name)
    ssh_ports = {SSH_PORT} | {n.port for n in members}
    code_ports = dict(CODE_PORTS)
    for n in members:
        for s in n.services:
            if s.runs_code:
                code_ports.setdefault(s.port, f"{n.name}/{s.name}")
    out = []
    watched = [(p, "SSH", "warning", "sg-ssh-open-to-world") for p in sorted(ssh_ports)]
    watched += [(p, what, "error", "sg-code-exec-public") for p, what in sorted(code_ports.items())]
    for port, what, severity, code in watched:
        rules = [(i, r) for i, r in enumerate(cluster_rules.ingress(inv, g)) if r.admits_tcp(port)]
        sources = [c for _, r in rules for c in _cidrs(r, inv)]
        if not rules or not covers_internet(sources):
            continue
        first = next((i for i, r in rules if _cidrs(r, inv)), rules[0][0])
        wide = ", ".join(dict.fromkeys(sources))
        if severity == "warning":
            out.append(Finding("warning", code, f"sg/{g.name}",
                               f"security group {g.name} opens {what} (tcp {port}) to the internet: {wide}",
                               "restrict the source to office/VPN ranges or the bastion's group",
                               cluster_rules.field_of(inv, g, first)))
        else:
            out.append(Finding("error", code, f"sg/{g.name}",
                               f"security group {g.name} opens port {port} ({what}) to the internet: {wide}; "
                               "it runs code for whoever reaches it",
                               "remove the rule; reach it with `provision tunnel`",
                               cluster_rules.field_of(inv, g, first)))
    return out


def host_admits(inv: Inventory, node: Host) -> dict[int, tuple[str, ...]]:
    """TCP port -> CIDRs the host firewall admits it from (the renderer's rules, as data)."""
    chain = inv.chain(node)
    ssh = (*(chain[-1].egress if chain else ()), *node.ssh_from)
    admits: dict[int, tuple[str, ...]] = {node.port: ssh}
    for s in node.services:
        if s.expose.kind == "public":
            admits[s.public_port] = (*admits.get(s.public_port, ()), *s.expose.sources)
    return admits


def _overlaps(a: str, b: str) -> bool:
    na, nb = ipaddress.ip_network(a), ipaddress.ip_network(b)
    return na.version == nb.version and (na.subnet_of(nb) or nb.subnet_of(na))  # type: ignore[arg-type]


def _covered(cidr: str, nets: Iterable[str]) -> bool:
    target = ipaddress.ip_network(cidr)
    same: list[Any] = [ipaddress.ip_network(n) for n in nets if ipaddress.ip_network(n).version == target.version]
    return any(target.subnet_of(n) for n in ipaddress.collapse_addresses(same))


def _ports_text(rule: IngressRule) -> str:
    if rule.protocol == "all":
        return "all traffic"
    if rule.from_port == rule.to_port:
        return f"{rule.protocol} {rule.from_port}"
    return f"{rule.protocol} {rule.from_port}-{rule.to_port}"


def _joined(inv: Inventory, node: Host, attached: list[SecurityGroup]) -> list[Finding]:
    out: list[Finding] = []
    admits = host_admits(inv, node)
    section = "bastions" if node.is_bastion else "hosts"
    tunnel_only = {s.port: s for s in node.services if s.expose.kind != "public"}
    for g in attached:
        for i, rule in enumerate(cluster_rules.ingress(inv, g)):
            if rule.protocol == "icmp":
                continue  # the host firewall admits ICMP echo
            where = cluster_rules.field_of(inv, g, i)
            # a rule admitting only fellow cluster members: the cluster's own firewall rules
            # admit them, and a service bound to loopback is not reached by them either
            in_cluster = clusters.served(inv, node, rule)
            odd = clusters.outside(inv, node, rule, g.name, where)
            out += odd
            src = ", ".join(rule.sources)
            cidrs = _cidrs(rule, inv)
            # a group none of whose machines has a known address: it may admit anything
            by_group = any(not is_cidr(s) and not group_members(inv, s) for s in rule.sources)

            def from_here(port: int, cidrs: list[str] = cidrs, by_group: bool = by_group) -> bool:
                allowed = admits.get(port, ())
                return bool(allowed) and (by_group or any(_overlaps(c, a) for c in cidrs for a in allowed))

            lo, hi = (0, 65535) if rule.protocol == "all" else (rule.from_port, rule.to_port)
            exposed = sorted(p for p in tunnel_only if lo <= p <= hi and rule.protocol in ("tcp", "all")
                             and not (in_cluster and tunnel_only[p].is_loopback))
            for p in exposed:
                s = tunnel_only[p]
                out.append(Finding(
                    "error", "sg-admits-tunnel-service", f"{node.name}/{s.name}",
                    f"security group {g.name} admits tcp {p} from {src}, the port of {s.name} on {node.name}, "
                    f"which is expose: {s.expose.kind} (bound to {s.bind}): only the host firewall stands "
                    "between it and those sources",
                    f"remove the rule from {g.name} (or narrow its ports); reach {s.name} with "
                    "`provision tunnel`", where))
            if in_cluster or odd:
                continue  # what the host firewall admits from them: the cluster's rules
            if rule.protocol == "udp":
                out.append(Finding(
                    "warning", "sg-port-dropped-by-host", f"{node.name}",
                    f"security group {g.name} admits {_ports_text(rule)} from {src} but {node.name}'s "
                    "firewall admits no UDP", "remove the rule, or it is for something the inventory does "
                    "not declare", where))
                continue
            open_ports = sorted(p for p in admits if lo <= p <= hi and from_here(p))
            single = lo == hi
            if single and not open_ports and lo not in tunnel_only:
                out.append(Finding(
                    "warning", "sg-port-dropped-by-host", node.name,
                    f"security group {g.name} admits tcp {lo} from {src} but {node.name}'s firewall drops it",
                    f"remove the rule, or declare what listens on {lo} (a public service or ssh_from)",
                    where))
            elif not single and (hi - lo + 1) > len(open_ports) + len(exposed):
                only = ", ".join(f"tcp {p}" for p in open_ports) or "none of them"
                out.append(Finding(
                    "warning", "sg-port-dropped-by-host", node.name,
                    f"security group {g.name} admits {_ports_text(rule)} from {src} but {node.name}'s "
                    f"firewall admits only {only}",
                    "narrow the rule to the ports that are served", where))
    for s in node.services:
        if s.expose.kind != "public":
            continue
        cloud = [c for g in attached for r in cluster_rules.ingress(inv, g)
                 if r.admits_tcp(s.public_port) for c in _cidrs(r, inv)]
        blocked = [c for c in s.expose.sources if not _covered(c, cloud)]
        if blocked:
            names = ", ".join(g.name for g in attached)
            out.append(Finding(
                "error", "sg-public-service-unreachable", f"{node.name}/{s.name}",
                f"{s.name} is declared public on tcp {s.public_port} and {node.name}'s firewall admits it, but no "
                f"security group of {node.name} ({names}) does: unreachable from {', '.join(blocked)}",
                f"add {{port: {s.public_port}, from: [{', '.join(blocked)}]}} to one of its groups, or attach a "
                "group that has it", f"{section}.{node.name}.services.{s.name}"))
    return out
