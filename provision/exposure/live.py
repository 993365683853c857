"""The exposure model fed live facts: what `provision audit` reports for one host. Pure.

Inputs: the inventory (what was declared), one host's `Facts` from the audit probe
(listeners, TCP states, the live firewall, `sshd -T`, Docker, Jupyter answers,
authorized_keys), and optionally the ingress rules of the security groups attached to it
(`SgRule`, from the inventory or from AWS describe calls). No I/O.

Per port it joins bind address x live host firewall verdict (IPv4 and IPv6 separately,
`provision.firewall.parse.admitted`) x attached security groups x tunnel into one class:

    nowhere < host < jump < declared < undeclared < internet

`nowhere`: nothing listens; `host`: loopback only, or the firewall admits no source;
`jump`: only the egress of the bastion in front of the host; `declared`: only sources the
inventory declares for that port; `undeclared`: other CIDRs; `internet`: the union covers the
internet (`covers_internet`).

Findings use the same `Finding` as `provision check`: `report` puts the declared-only
findings of `provision.exposure.findings` (exactly what `check` prints) beside the live ones.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

from provision.cloud import cluster_rules
from provision.facts import Facts
from provision.facts import docker as D
from provision.facts import door as DOOR
from provision.facts import gpus as GPUS
from provision.facts import iptables as IPT
from provision.facts import jupyter_auth as J
from provision.facts import listeners as L
from provision.facts import sshd_config as SC
from provision.facts import sshd_effective as SSHD
from provision.facts import sysctl as SYS
from provision.facts import tcpstates as TS
from provision.facts import timesync as TIME
from provision.facts import updates as UPD
from provision.facts.spec import Request
from provision.finding import Finding, sort_findings
from provision.firewall import parse as FP
from provision.firewall.rules import (
    Family,
    HostFirewall,
    cluster_sources,
    host_firewall,
    ssh_sources,
)
from provision.inventory.model import Host, Inventory, Service
from provision.record import record
from provision.render import SSHD_DROPIN, render_host
from provision.tasks import sshd_effect as E
from provision.tasks.files import sha256
from provision.tasks.users import authorized_keys
from provision.tasks.verify import drops_peers, in_the_way

from . import findings
from .clock import clock_findings
from .door_live import served_findings
from .gpus import gpu_findings
from .internet import covers_internet
from .members import group_members
from .reboot import reboot_findings

LEVELS = ("nowhere", "host", "jump", "declared", "undeclared", "internet")
AUDIT_FACTS = ("door", "listeners", "tcpstates", "sysctl", "iptables", "sshd_effective", "sshd_config",
               "docker", "jupyter_auth", "timesync", "gpus", "updates")
CODE_PROCESSES = re.compile(r"jupyter|tensorboard|ipykernel", re.I)
# Client ports every DHCP-configured server listens on (replies come back to them): never an
# exposure worth a warning; reported as info.
CLIENT_PORTS = {("udp", 68): "DHCP client", ("udp", 546): "DHCPv6 client"}
CLOSE_WAIT_PILE = 100  # CLOSE_WAIT sockets held by one process
TIME_WAIT_SHARE = 0.25  # of the ephemeral port range


def request(inv: Inventory) -> Request:
    """What the audit probe asks a host: the audit facts and every team member's keys."""
    logins = tuple(dict.fromkeys(n.user for n in (*inv.bastions, *inv.hosts)))
    sockets = tuple(dict.fromkeys(f"{s.member}:{s.socket or s.port}" for h in inv.hosts
                                  for s in h.services if s.member))
    return Request(users=tuple(p.name for p in inv.team), facts=AUDIT_FACTS,
                   sshd_users=tuple(dict.fromkeys((*logins, *(p.name for p in inv.team)))),
                   member_sockets=sockets)


@record
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


@record
class Side:
    """One address family of a port."""

    bound: bool  # something listens on a non-loopback address of this family
    sources: tuple[str, ...]  # CIDRs the host firewall (and attached groups) let in
    level: str


@record
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


@record
class HostReport:
    host: str
    ports: tuple[PortReach, ...]
    findings: tuple[Finding, ...]
    drift: tuple[FP.Drift, ...]
    tcp_states: dict[str, int] = field(default_factory=dict)
    close_wait: tuple[tuple[str, int | None, int], ...] = ()  # (process, pid, sockets)
    docker: tuple[dict[str, Any], ...] = ()
    gpus: str = ""  # the GPUs in one line (`provision.facts.gpus`), empty without nvidia-smi

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f.severity == s) for s in ("error", "warning", "info")}

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "counts": self.counts(),
                "findings": [f.__dict__ for f in self.findings],
                "ports": [p.to_json() for p in self.ports],
                "drift": [{"family": d.family, "chain": d.chain, "kind": d.kind, "rule": d.text,
                           "message": d.describe()} for d in self.drift],
                "sockets": {"states": self.tcp_states,
                            "close_wait": [{"process": p, "pid": pid, "sockets": n}
                                           for p, pid, n in self.close_wait]},
                "docker": list(self.docker), "gpus": self.gpus or None}


# --- the join ---------------------------------------------------------------------------

@record
class _Want:
    """A declared TCP port: sshd or a service."""

    label: str
    bind: str | None  # None: sshd (any address)
    sources: tuple[str, ...]  # what the inventory lets in
    service: Service | None = None


def _wanted(inv: Inventory, host: Host) -> dict[int, list[_Want]]:
    out: dict[int, list[_Want]] = {host.port: [_Want("ssh", None, ssh_sources(inv, host))]}
    for s in host.services:
        srcs = s.expose.sources if s.expose.kind == "public" else ()
        if s.https is not None:  # the world reaches the door; the service only on loopback
            out.setdefault(s.https.port, []).append(_Want(f"the door of {s.name}", None, srcs))
            srcs = ()
        out.setdefault(s.port, []).append(_Want(f"service {s.name}", s.bind, srcs, s))
    return out


def _level(space: FP.AddressSet, bound: bool, jump: FP.AddressSet, declared: FP.AddressSet) -> str:
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


def _sg_space(rules: Sequence[SgRule] | None, proto: str, port: int, family: Family) -> FP.AddressSet:
    if rules is None:
        return FP.AddressSet.everything(family)
    return FP.AddressSet.of(family, [c for r in rules if r.admits(proto, port)
                                     for c in ((r.peer,) if r.is_cidr else r.members)])


def _sg_text(rules: Sequence[SgRule] | None, proto: str, port: int) -> str:
    if rules is None:
        return ""
    peers = [r.peer if r.is_cidr else f"sg:{r.peer}" if r.declared
             else f"sg:{r.peer} (not declared)" for r in rules if r.admits(proto, port)]
    return ", ".join(dict.fromkeys(peers)) or "not admitted"


@record
class Expected:
    """What the inventory renders for a host, that the live facts are compared with."""

    firewall: HostFirewall
    sshd: dict[str, str]  # the hardening baseline (`sshd_baseline`)


def expected(inv: Inventory, host: Host) -> Expected:
    """Render what audit compares against (the CLI does this while the probes are in flight)."""
    return Expected(host_firewall(inv, host, allow_lockout=True), sshd_baseline(inv, host))


def report(inv: Inventory, host: Host, facts: Facts, sg_rules: Sequence[SgRule] | None = None,
           want: Expected | None = None, now: float | None = None) -> HostReport:
    """Everything `audit` says about one host (declared-only findings are not included:
    they are per inventory, see `declared_findings`). `want`: `expected(inv, host)`."""
    want = want or expected(inv, host)
    fw = want.firewall
    ipt = facts.get(IPT.SPEC)
    found: list[Finding] = []
    lives: dict[int, FP.LiveFilter | None] = {}
    drifts: list[FP.Drift] = []
    fams: tuple[Family, ...] = (4, 6)
    for fam in fams:
        live, d, f = _firewall(host, fw, ipt, fam)
        lives[fam] = live
        drifts += d
        found += f
    listeners = facts.get(L.SPEC)
    auth = facts.get(J.SPEC)
    jupyter = auth.answers
    ports = _ports(inv, host, listeners, lives, sg_rules, facts)
    found += _listener_findings(inv, host, ports, listeners)
    found += _jupyter_findings(host, jupyter)
    found += member_server_findings(host, auth)
    found += served_findings(host, facts.get(DOOR.SPEC), time.time() if now is None else now)
    gpus = facts.get(GPUS.SPEC)
    found += gpu_findings(host, gpus)
    found += _sshd_findings(host, want.sshd, facts.get(SSHD.SPEC), facts.get(SC.SPEC))
    found += _key_findings(inv, host, facts)
    found += clock_findings(host, facts.get(TIME.SPEC))
    found += reboot_findings(host, facts.get(UPD.SPEC))
    states = facts.get(TS.SPEC)
    found += _socket_findings(host, states, SYS.port_range(facts.get(SYS.SPEC)))
    published: tuple[D.Published, ...] = facts.get(D.SPEC)
    docker_rows, docker_found = _docker(inv, host, published, lives, sg_rules)
    found += docker_found
    close_wait = tuple(sorted(((p, pid, n) for (p, pid), n in states.close_wait.items()),
                              key=lambda t: -t[2]))
    order = {lvl: i for i, lvl in enumerate(LEVELS)}
    return HostReport(host.name, tuple(sorted(ports, key=lambda p: (-order[p.level], p.port, p.proto))),
                      sort_findings(found), tuple(drifts), dict(states.counts), close_wait,
                      tuple(docker_rows), gpus.summary)


def declared_findings(inv: Inventory) -> tuple[Finding, ...]:
    """The declared layer: exactly what `provision check` reports for this inventory."""
    return findings(inv)


def _firewall(host: Host, fw: HostFirewall, ipt: IPT.IptablesSave,
              fam: Family) -> tuple[FP.LiveFilter | None, list[FP.Drift], list[Finding]]:
    status = ipt.status(fam)
    if status is None:
        return None, [], []
    if status != 0:
        d = FP.Drift(fam, "", "unreadable", f"ip{'6' if fam == 6 else ''}tables-save exited {status}")
        return None, [d], [Finding("warning", "firewall-unreadable", host.name, d.describe(),
                                   "install iptables; audit assumes no firewall")]
    try:
        live = FP.parse_save(ipt.text(fam), fam)
    except FP.ParseError as e:
        d = FP.Drift(fam, "", "unreadable", str(e))
        return None, [d], [Finding("warning", "firewall-unreadable", host.name, d.describe(),
                                   "report this output; audit assumes no firewall")]
    rs = fw.v4 if fam == 4 else fw.v6
    drifts = FP.drift(rs, live)
    drifts += FP.drift(fw.docker_v4 if fam == 4 else fw.docker_v6, live, hook_required=False)
    found = [Finding("error", "firewall-bypassed", host.name, f"IPv{fam}: {w}",
                     "remove that rule or disable the tool (`ufw disable`), then re-apply")
             for w in in_the_way(live, rs.chain, rs.hook)]
    found += [Finding("error", "cluster-blocked", host.name, f"IPv{fam}: {w}",
                      "remove that rule (or the tool that adds it): the cluster's members must "
                      "reach each other")
              for w in drops_peers(live, rs)]
    fix = "re-apply (`provision apply --playbook harden`), or run provision-firewall on the host"
    for d in drifts:
        severe = d.kind in ("missing-chain", "flushed", "unhooked")
        found.append(Finding("error" if severe else "warning", f"firewall-{d.kind}", host.name,
                             d.describe(), fix if severe else
                             "declare what it is for in the inventory and re-apply, or re-apply to remove it"))
    return live, drifts, found


def _ports(inv: Inventory, host: Host, listeners: Sequence[L.Listener],
           lives: Mapping[int, FP.LiveFilter | None], sg_rules: Sequence[SgRule] | None,
           facts: Facts) -> list[PortReach]:
    wanted = _wanted(inv, host)
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
            space = (FP.admitted(live, FP.Packet(proto, port)) if live is not None
                     else FP.AddressSet.everything(fam))
            space = space & _sg_space(sg_rules, proto, port, fam)
            if not bound:
                space = FP.AddressSet(fam)
            level = _level(space, bound, FP.AddressSet.of(fam, egress),
                           FP.AddressSet.of(fam, declared_srcs))
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


def _where(p: PortReach) -> str:
    parts = []
    for fam, side in ((4, p.v4), (6, p.v6)):
        if side.sources:
            shown = ", ".join(side.sources[:4]) + (" ..." if len(side.sources) > 4 else "")
            parts.append(f"IPv{fam} from {shown}")
    return "; ".join(parts) or "no source (the firewall drops it)"


def _listener_findings(inv: Inventory, host: Host, ports: Sequence[PortReach],
                       listeners: Sequence[L.Listener]) -> list[Finding]:
    wanted = _wanted(inv, host)
    out: list[Finding] = []
    for p in ports:
        subject = f"{host.name}:{p.port}/{p.proto}"
        here = [s for s in listeners if (s.proto, s.port) == (p.proto, p.port)]
        wants = wanted.get(p.port, []) if p.proto == "tcp" else []
        proc = f" ({p.process})" if p.process else ""
        exposed = p.level not in ("nowhere", "host")
        code = any(w.service is not None and w.service.runs_code for w in wants) \
            or bool(CODE_PROCESSES.search(p.process))
        if code and p.level == "internet":
            out.append(Finding("error", "code-exec-internet", subject,
                               f"{p.declared or p.process} runs code for whoever reaches it and is "
                               f"reachable from the internet: {_where(p)}",
                               "bind it to 127.0.0.1 and use `provision tunnel`"))
        if not wants:
            if not here:
                continue
            if all(s.is_loopback for s in here):
                out.append(Finding("info", "loopback-listener", subject,
                                   f"{', '.join(p.listeners)}{proc} listens on loopback only", ""))
            elif (p.proto, p.port) in CLIENT_PORTS and not exposed:
                out.append(Finding("info", "client-port", subject,
                                   f"{', '.join(p.listeners)}{proc}: {CLIENT_PORTS[p.proto, p.port]}", ""))
            elif exposed and p.level == "declared":  # undeclared ports: a cluster's peers only
                names = ", ".join(c.name for c in inv.clusters_of(host.name))
                out.append(Finding("warning", "undeclared-listener-cluster", subject,
                                   f"undeclared {', '.join(p.listeners)}{proc} is reachable by the "
                                   f"members of cluster {names} only (every account on them): "
                                   f"{_where(p)}",
                                   "bind it to 127.0.0.1 unless the cluster's jobs use it, or "
                                   "narrow the cluster's `ports`"))
            elif exposed:
                out.append(Finding("error", "undeclared-listener-exposed", subject,
                                   f"undeclared {', '.join(p.listeners)}{proc} is reachable: {_where(p)}",
                                   "stop it or bind it to 127.0.0.1; if it belongs, declare it as a "
                                   "service and re-apply (that also removes hand-made firewall rules)"))
            else:
                out.append(Finding("warning", "undeclared-listener", subject,
                                   f"undeclared {', '.join(p.listeners)}{proc} listens on a "
                                   "non-loopback address; the host firewall drops it for now",
                                   "stop it or bind it to 127.0.0.1 (one firewall change from exposed)"))
            continue
        for w in wants:
            if w.service is None:
                continue  # sshd and doors: their sources are checked below
            s = w.service
            sub = f"{host.name}/{s.name}"
            if not here:
                out.append(Finding("warning", "not-listening", sub,
                                   f"{s.name} is declared on {s.bind}:{s.port} but nothing listens on "
                                   f"port {s.port}", f"systemctl status {s.unit_name} on {host.name}"))
                continue
            if not any(_same_bind(s.bind, x.address) for x in here):
                wider = any(x.is_wildcard for x in here) and not s.is_wildcard
                out.append(Finding(
                    "error" if wider and exposed else "warning", "wrong-address", sub,
                    f"{s.name} is declared on {s.bind}:{s.port} but listens on {', '.join(p.listeners)}"
                    + (f", reachable: {_where(p)}" if wider and exposed else ""),
                    f"restart it with --bind {s.bind} (its unit: {s.unit_name})"))
        if exposed and p.level in ("undeclared", "internet") and not _declared_internet(wants):
            out.append(Finding("error", "exposed-beyond-declared", subject,
                               f"{p.declared}{proc} is reachable beyond what the inventory declares: "
                               f"{_where(p)}",
                               "re-apply the firewall (`provision apply --playbook harden`)"))
    return out


def _declared_internet(wants: Sequence[_Want]) -> bool:
    return any(covers_internet(w.sources) for w in wants)


def _same_bind(declared: str, live: str) -> bool:
    if declared == live:
        return True
    if declared == "0.0.0.0":
        return live == "*"
    if declared == "::":
        return live in ("*", "::")
    return False


def _jupyter_findings(host: Host, answers: Sequence[J.JupyterAnswer]) -> list[Finding]:
    out = []
    for a in answers:
        if a.open:
            out.append(Finding("error", "jupyter-no-token", f"{host.name}:{a.port}/tcp",
                               f"the Jupyter server on {a.address}:{a.port} (pid {a.pid}) answers "
                               "/api/status without a token or password: anyone who reaches it runs "
                               "code as its user",
                               "start it with a token (provision's rendered config does), or a password"))
    return out


def member_server_findings(host: Host, auth: J.JupyterAuth) -> list[Finding]:
    """Each member's own Jupyter answers on its socket (or port), wants a token (403 without
    one; an open one is `jupyter-no-token`), and runs as that member; on a port, nobody else
    listens there in its place."""
    out = []
    by_port = {a.port: a for a in auth.answers if a.address in ("127.0.0.1", "::1")}
    for s in host.services:
        if s.member is None:
            continue
        subject = f"{host.name}/{s.name}"
        field = f"hosts.{host.name}.services.{s.template}.per_user"
        if s.socket is not None:
            out += _member_socket_findings(s, auth.sockets.get(s.member), subject, field)
            continue
        for h in auth.holders:
            if h.member == s.member and h.port == s.port and h.owner != s.member:
                out.append(Finding("error", "member-port-held", subject,
                                   f"127.0.0.1:{s.port}, {s.member}'s server port, is held by "
                                   f"pid {h.pid} of {h.owner}: {s.member}'s browser (and "
                                   "token) would reach it through her tunnel",
                                   "stop that process; use per_user_socket (the default) so "
                                   "no other account can take the server's place", field))
        a = by_port.get(s.port)
        if a is None or a.status == 0:
            out.append(Finding("error", "member-server-down", subject,
                               f"{s.member}'s Jupyter ({s.unit_name}) does not answer on "
                               f"127.0.0.1:{s.port}",
                               f"see `journalctl -u {s.unit_name}`; `provision apply` starts it",
                               field))
            continue
        if a.status not in (200, 403):
            out.append(Finding("warning", "member-server-answer", subject,
                               f"{s.member}'s Jupyter on 127.0.0.1:{s.port} answers /api/status "
                               f"with HTTP {a.status} (a server that wants a token says 403)",
                               "check what listens there", field))
        if a.owner and a.owner != s.member:
            out.append(Finding("error", "member-server-owner", subject,
                               f"the Jupyter on 127.0.0.1:{s.port} (pid {a.pid}) runs as "
                               f"{a.owner}, not {s.member}: whoever holds its token runs code "
                               f"as {a.owner}",
                               f"stop it; `provision apply` starts {s.unit_name} as {s.member}",
                               field))
    return out


def _member_socket_findings(s: Service, a: J.SocketAnswer | None, subject: str,
                     field: str) -> list[Finding]:
    """A member's server on its Unix socket, as the member found it."""
    where = f"{s.member}'s Jupyter ({s.unit_name}) on {s.socket}"
    if a is None or a.state in ("absent", "nouser") or a.status == 0:
        why = "has no socket" if a is not None and a.state == "absent" else "does not answer"
        return [Finding("error", "member-server-down", subject, f"{where} {why}",
                        f"see `journalctl -u {s.unit_name}`; `provision apply` starts it", field)]
    if a.state == "foreign":
        return [Finding("error", "member-server-owner", subject,
                        f"{where}: the socket is not {s.member}'s",
                        f"`provision apply` restarts {s.unit_name}", field)]
    if a.status == 200:
        return [Finding("error", "jupyter-no-token", subject,
                        f"{where} answers without a token: whoever reaches the socket runs code "
                        f"as {s.member}", "start it with a token (provision's rendered config "
                        "does)", field)]
    if a.status != 403:
        return [Finding("warning", "member-server-answer", subject,
                        f"{where} answers /api/status with HTTP {a.status} (a server that "
                        "wants a token says 403)", "check what listens there", field)]
    return []


def sshd_baseline(inv: Inventory, host: Host) -> dict[str, str]:
    """The hardening baseline: the settings of the rendered sshd drop-in, lower-case keys."""
    (dropin,) = [a for a in render_host(inv, host) if a.kind == "sshd"]
    return E.hardened(dropin.content)


def _sshd_findings(host: Host, baseline: dict[str, str], sshd: SSHD.SshdEffective,
                   cfg: SC.SshdConfig) -> list[Finding]:
    """A way in with a password that the hardening closes is an error, named with the file
    and line that opens it; any other difference from the baseline is a warning."""
    if sshd.status is None:
        return []
    if sshd.status != 0:
        return [Finding("warning", "sshd-unreadable", host.name,
                        f"sshd -T exited {sshd.status}: {sshd.error.strip()[:200]}",
                        "run `sshd -t` on the host")]
    out = []
    weak = E.weaknesses(sshd, cfg, baseline)
    for w in weak:
        out.append(Finding("error", "sshd-weak", host.name,
                           f"{w.describe()}; the hardening baseline says "
                           f"{w.key} {baseline.get(w.key, 'no')}",
                           "remove or change that line (provision never edits files it does not "
                           "own), then re-apply (`provision apply --playbook harden`)"))
    weak_keys = {w.key for w in weak}
    for m in E.compare(baseline, sshd, cfg, SSHD_DROPIN):
        if m.key in weak_keys:
            continue
        out.append(Finding("warning", "sshd-drift", host.name, m.describe(),
                           "re-apply (`provision apply --playbook harden`); where another file "
                           "or a Match block wins, change that line"))
    return out


def _key_findings(inv: Inventory, host: Host, facts: Facts) -> list[Finding]:
    if not facts.users and not facts.absent_users:
        return []  # users were not probed
    out = []
    team = {p.name for p in inv.team}
    for p in inv.team:
        u = facts.users.get(p.name)
        if u is None:
            out.append(Finding("warning", "keys-drift", f"{host.name}/{p.name}",
                               f"team member {p.name} has no account on {host.name}", "re-apply"))
            continue
        f = facts.file(f"{u.home}/.ssh/authorized_keys")
        if f.kind != "file" or f.sha256 != sha256(authorized_keys(p.name, p.keys)):
            what = "is missing" if f.kind != "file" else "differs from the team's keys"
            out.append(Finding("warning", "keys-drift", f"{host.name}/{p.name}",
                               f"{u.home}/.ssh/authorized_keys {what}", "re-apply (users step)"))
    for name in facts.managed_users:
        if name in team:
            continue
        former = facts.file(f"{facts.users[name].home}/.ssh/authorized_keys") if name in facts.users else None
        keys = [ln for ln in (former.content or "").splitlines()
                if ln and not ln.startswith("#")] if former else []
        if keys:
            out.append(Finding("error", "keys-former-member", f"{host.name}/{name}",
                               f"{name} is not in the team but still has {len(keys)} key(s) in "
                               "authorized_keys", "re-apply (users step retires the account)"))
    return out


def _socket_findings(host: Host, states: TS.TcpStates, port_range: tuple[int, int] | None) -> list[Finding]:
    out = []
    for (proc, pid), n in sorted(states.close_wait.items(), key=lambda kv: -kv[1]):
        if n >= CLOSE_WAIT_PILE:
            who = f"{proc} (pid {pid})" if proc else "sockets no process holds"
            out.append(Finding(
                "warning", "close-wait-pile", f"{host.name}/{proc or '?'}",
                f"{who} holds {n} TCP sockets in CLOSE_WAIT: the peers closed their side and the "
                "application never called close(); each one keeps a file descriptor and memory "
                "until the process exits",
                f"fix the leak in {proc or 'the application'} (close sockets on EOF, use timeouts); "
                "restarting it frees them for now"))
    tw = states.count("TIME-WAIT")
    if port_range and tw:
        size = port_range[1] - port_range[0] + 1
        if tw >= TIME_WAIT_SHARE * size:
            out.append(Finding(
                "warning", "time-wait-share", host.name,
                f"{tw} sockets in TIME_WAIT = {tw / size:.0%} of the ephemeral port range "
                f"{port_range[0]}-{port_range[1]}: this host opens short connections faster than "
                "the kernel retires them, and new outgoing connections will fail to find a port",
                "reuse connections (HTTP keep-alive, pools), or widen net.ipv4.ip_local_port_range"))
    return out


def _docker(inv: Inventory, host: Host, published: Sequence[D.Published],
            lives: Mapping[int, FP.LiveFilter | None],
            sg_rules: Sequence[SgRule] | None) -> tuple[list[dict[str, Any]], list[Finding]]:
    rows: list[dict[str, Any]] = []
    out: list[Finding] = []
    public = {s.port: s for s in host.services if s.expose.kind == "public"}
    for p in published:
        fam: Family = 6 if ":" in p.address else 4
        cidrs: tuple[str, ...] = ()
        if p.is_loopback:
            level = "host"
        else:
            live = lives.get(fam)
            if live is not None and live.chain("DOCKER-USER") is not None:
                space = FP.admitted(live, FP.Packet(p.proto, p.port, dnat=True), start="DOCKER-USER")
            else:
                space = FP.AddressSet.everything(fam)
            space = space & _sg_space(sg_rules, p.proto, p.port, fam)
            svc = public.get(p.port)
            level = _level(space, True, FP.AddressSet(fam),
                           FP.AddressSet.of(fam, svc.expose.sources if svc else ()))
            cidrs = space.cidrs()
        rows.append({"container": p.container, "address": p.address, "port": p.port,
                     "proto": p.proto, "target": p.target, "reach": level, "sources": list(cidrs)})
        if level in ("undeclared", "internet"):
            out.append(Finding("error", "docker-published-exposed", f"{host.name}:{p.port}/{p.proto}",
                               f"container {p.container} publishes {p.address}:{p.port} -> {p.target}, "
                               f"reachable from {', '.join(cidrs[:4])} (Docker bypasses INPUT)",
                               "publish on 127.0.0.1 (-p 127.0.0.1:PORT:PORT), or declare a public "
                               "service on that port and re-apply (PROVISION-DOCKER restricts it)"))
        else:
            out.append(Finding("info", "docker-published", f"{host.name}:{p.port}/{p.proto}",
                               f"container {p.container} publishes {p.address}:{p.port} -> {p.target} "
                               f"(reach: {level})", ""))
    return rows, out
