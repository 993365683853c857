"""Which packets each host accepts: the host firewall as plain data (pure, no I/O).

The renderer turns a `Ruleset` into `iptables-restore` text through a template; this
module only decides. Guarantees, by construction:

- every rule lives in a chain we own (`PROVISION-INPUT`, `PROVISION-DOCKER`); no rule in
  this module ever names a foreign chain, and nothing here flushes one;
- all ACCEPT/RETURN rules come before the final catch-all DROP (`Ruleset.rules` ends with
  it and `build_*` never appends after it);
- v4 and v6 are separate rulesets; a source goes only into the ruleset of its family;
- there is always an SSH source for the operator path, else `RenderError` (unless the
  caller passes `allow_lockout=True`).

How the chains are hooked in (the apply step and the boot unit both run the rendered
`provision-firewall` script, which does exactly this): `iptables-restore --noflush FILE`
replaces only our chain (declaring `:PROVISION-INPUT - [0:0]` creates it or, with
--noflush, flushes just that chain), then `iptables -C INPUT -j PROVISION-INPUT ||
iptables -I INPUT 1 -j PROVISION-INPUT` adds the jump only when it is missing, so it exists
exactly once however often we apply. The Docker snippet is loaded only when `DOCKER-USER`
exists, and hooked the same way from `DOCKER-USER`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Literal

from provision.errors import RenderError
from provision.frozen import frozen
from provision.inventory.model import Host, Inventory

INPUT_CHAIN = "PROVISION-INPUT"
DOCKER_CHAIN = "PROVISION-DOCKER"
# The chains we jump from; we insert one rule there and never flush or rewrite them.
HOOKS: dict[str, str] = {INPUT_CHAIN: "INPUT", DOCKER_CHAIN: "DOCKER-USER"}

Family = Literal[4, 6]
Target = Literal["ACCEPT", "DROP", "RETURN"]

# ICMPv6 neighbour discovery (RFC 4861): router/neighbour solicitation and advertisement,
# redirect. Valid only with hop limit 255 (never forwarded), so we require exactly that.
ND_TYPES: tuple[str, ...] = (
    "router-solicitation", "router-advertisement", "neighbour-solicitation",
    "neighbour-advertisement", "redirect",
)
# Multicast listener discovery (query, report, done, v2 report): link-local only.
MLD_TYPES: tuple[str, ...] = ("130", "131", "132", "143")
ECHO_LIMIT = "10/second"
ECHO_BURST = 20


@frozen
class Rule:
    """One `-A CHAIN ...` line as data; the template spells out the options."""

    target: Target
    comment: str
    in_iface: str | None = None
    source: str | None = None
    proto: str | None = None  # tcp | udp | icmp | ipv6-icmp
    dport: int | None = None
    dport_to: int | None = None  # with `dport`: the range dport..dport_to (`--dport A:B`)
    ctstate: tuple[str, ...] = ()
    ctorigdstport: int | None = None
    icmp_type: str | None = None
    hoplimit: int | None = None
    limit: str | None = None
    limit_burst: int | None = None


@frozen
class Ruleset:
    family: Family
    chain: str
    hook: str  # the foreign chain that jumps to `chain` (hooked by the apply script)
    rules: tuple[Rule, ...]


@frozen
class HostFirewall:
    v4: Ruleset
    v6: Ruleset
    docker_v4: Ruleset
    docker_v6: Ruleset
    ssh_sources: tuple[str, ...]  # both families, sorted


def _family(cidr: str) -> Family:
    return 4 if ipaddress.ip_network(cidr).version == 4 else 6


def sorted_cidrs(cidrs: Iterable[str]) -> tuple[str, ...]:
    """Unique CIDRs, v4 before v6, in address order (deterministic output)."""
    nets = {ipaddress.ip_network(c) for c in cidrs}
    return tuple(str(n) for n in sorted(nets, key=lambda n: (n.version, n.network_address, n.prefixlen)))


def ssh_sources(inv: Inventory, host: Host) -> tuple[str, ...]:
    """Who may reach this node's sshd: the egress of the bastion in front of it, plus ssh_from.

    For bastions `ssh_from` is `allow_ssh_from`; a bastion behind another bastion also
    accepts its own jump host's egress.
    """
    chain = inv.chain(host)
    jump_egress = chain[-1].egress if chain else ()
    return sorted_cidrs((*jump_egress, *host.ssh_from))


def _split(cidrs: Iterable[str], family: Family) -> tuple[str, ...]:
    return tuple(c for c in cidrs if _family(c) == family)


def input_ruleset(inv: Inventory, host: Host, family: Family) -> Ruleset:
    icmp = "icmp" if family == 4 else "ipv6-icmp"
    rules: list[Rule] = [Rule("ACCEPT", "loopback", in_iface="lo")]
    if family == 6:
        # Before the conntrack rules: ND/MLD are untracked, and must never be caught by INVALID.
        rules += [Rule("ACCEPT", f"neighbour discovery: {t}", proto=icmp, icmp_type=t, hoplimit=255)
                  for t in ND_TYPES]
        rules += [Rule("ACCEPT", f"multicast listener discovery: type {t}", source="fe80::/10",
                       proto=icmp, icmp_type=t) for t in MLD_TYPES]
    rules += [
        Rule("ACCEPT", "replies and related ICMP errors", ctstate=("ESTABLISHED", "RELATED")),
        Rule("DROP", "invalid packets", ctstate=("INVALID",)),
        Rule("ACCEPT", "ping, rate-limited", proto=icmp,
             icmp_type="echo-request", limit=ECHO_LIMIT, limit_burst=ECHO_BURST),
    ]
    for src in _split(ssh_sources(inv, host), family):
        rules.append(Rule("ACCEPT", "ssh", source=src, proto="tcp", dport=host.port,
                          ctstate=("NEW",)))
    for svc in sorted(host.services, key=lambda s: (s.public_port, s.name)):
        if svc.expose.kind != "public":
            continue
        for src in _split(sorted_cidrs(svc.expose.sources), family):  # the door's port, if any
            rules.append(Rule("ACCEPT", f"service {svc.name}", source=src, proto="tcp",
                              dport=svc.public_port, ctstate=("NEW",)))
    rules += cluster_rules(inv, host, family)
    rules.append(Rule("DROP", "everything else"))
    return Ruleset(family, INPUT_CHAIN, HOOKS[INPUT_CHAIN], tuple(rules))


def _host_net(address: str) -> str:
    return str(ipaddress.ip_network(address))  # one address: /32 or /128


CLUSTER_COMMENT = "cluster "  # what a cluster rule's comment starts with: "cluster NAME: PEER"


def is_cluster_rule(rule: Rule) -> bool:
    return rule.target == "ACCEPT" and rule.comment.startswith(CLUSTER_COMMENT)


def cluster_sources(inv: Inventory, host: Host, proto: str, port: int) -> tuple[str, ...]:
    """The peers' addresses (`/32`, `/128`) `host` admits on `proto`/`port` for its clusters:
    declared by the inventory as surely as a service's sources."""
    out: list[str] = []
    for c in inv.clusters_of(host.name):
        if proto not in c.protocols or (c.ports and not any(lo <= port <= hi
                                                            for lo, hi in c.ports)):
            continue
        out += [_host_net(a) for peer in c.members if peer != host.name
                for a in c.addresses_of(peer)]
    return tuple(dict.fromkeys(out))


def cluster_rules(inv: Inventory, host: Host, family: Family) -> list[Rule]:
    """What `host` admits from the other members of its clusters: each peer's training
    addresses of this family, for each protocol, on the cluster's ports (every port when it
    names none). A peer in two clusters is admitted once per port span."""
    rules: list[Rule] = []
    seen: set[tuple[str, str, int | None, int | None]] = set()
    for c in sorted(inv.clusters_of(host.name), key=lambda c: c.name):
        spans: tuple[tuple[int | None, int | None], ...] = (
            tuple((lo, hi if hi != lo else None) for lo, hi in c.ports) or ((None, None),))
        for peer in c.members:
            if peer == host.name:
                continue
            for addr in c.addresses_of(peer):
                if _family(addr) != family:
                    continue
                for proto in c.protocols:
                    for lo, hi in spans:
                        key = (_host_net(addr), proto, lo, hi)
                        if key in seen:
                            continue
                        seen.add(key)
                        rules.append(Rule("ACCEPT", f"{CLUSTER_COMMENT}{c.name}: {peer}",
                                          source=key[0], proto=proto, dport=lo, dport_to=hi,
                                          ctstate=("NEW",)))
    return rules


def docker_ruleset(host: Host, family: Family) -> Ruleset:
    """Restrict ports that Docker publishes (DNAT, via FORWARD, bypassing INPUT).

    Only connections Docker DNATed are judged; container egress and traffic between
    containers (arriving on docker bridges) pass untouched. A published port stays
    reachable only where the inventory exposes a service on it publicly.
    """
    rules: list[Rule] = [
        Rule("RETURN", "replies", ctstate=("ESTABLISHED", "RELATED")),
        Rule("RETURN", "from containers on the default bridge", in_iface="docker0"),
        Rule("RETURN", "from containers on user-defined bridges", in_iface="br-+"),
    ]
    for svc in sorted(host.services, key=lambda s: (s.port, s.name)):
        if svc.expose.kind != "public" or svc.https:  # behind the door: on loopback only
            continue
        for src in _split(sorted_cidrs(svc.expose.sources), family):
            rules.append(Rule("RETURN", f"published service {svc.name}", source=src, proto="tcp",
                              ctstate=("DNAT",), ctorigdstport=svc.port))
    rules.append(Rule("DROP", "other published ports", ctstate=("DNAT",)))
    return Ruleset(family, DOCKER_CHAIN, HOOKS[DOCKER_CHAIN], tuple(rules))


def host_firewall(inv: Inventory, host: Host, *, allow_lockout: bool = False) -> HostFirewall:
    """The firewall for a bastion or host. Refuses a ruleset that would lock the operator out."""
    sources = ssh_sources(inv, host)
    if not sources and not allow_lockout:
        what = "bastion" if host.is_bastion else "host"
        hint = ("set 'allow_ssh_from' on the bastion" if host.is_bastion else
                "reach it 'via' a bastion with an IP address or 'egress', or set 'ssh_from'")
        raise RenderError(
            f"{what} '{host.name}': the firewall would allow SSH from nowhere and lock the "
            f"operator out; {hint}")
    return HostFirewall(
        v4=input_ruleset(inv, host, 4), v6=input_ruleset(inv, host, 6),
        docker_v4=docker_ruleset(host, 4), docker_v6=docker_ruleset(host, 6),
        ssh_sources=sources)
