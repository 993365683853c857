"""The exposure model fed live facts: what `provision audit` reports for one host. Pure.

Inputs: the inventory (what was declared), one host's `Facts` from the audit probe
(listeners, TCP states, the live firewall, `sshd -T`, Docker, Jupyter answers,
authorized_keys), and optionally the ingress rules of the security groups attached to it
(`SgRule`, from the inventory or from AWS describe calls). No I/O.

The per-port join is `provision.exposure.join`; each family of findings has a module of its
own (`firewall_live`, `listeners`, `jupyter`, `sshd`, `keys`, `sockets`, `docker`, beside
`door_live`, `gpus`, `clock` and `reboot`). Findings use the same `Finding` as `provision
check`: `report` puts the declared-only findings of `provision.exposure.findings` (exactly
what `check` prints) beside the live ones.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import field
from typing import Any

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
from provision.firewall import drift as FD
from provision.firewall import parse as FP
from provision.firewall.rules import Family, HostFirewall, host_firewall
from provision.frozen import frozen
from provision.inventory.model import Host, Inventory

from . import findings
from .clock import clock_findings
from .docker import docker_findings
from .door_live import served_findings
from .firewall_live import firewall_findings
from .gpus import gpu_findings
from .join import LEVELS, PortReach, SgRule, join_ports
from .jupyter import jupyter_findings, member_server_findings
from .keys import key_findings
from .listeners import listener_findings
from .reboot import reboot_findings
from .sockets import socket_findings
from .sshd import sshd_baseline, sshd_findings

AUDIT_FACTS = ("door", "listeners", "tcpstates", "sysctl", "iptables", "sshd_effective", "sshd_config",
               "docker", "jupyter_auth", "timesync", "gpus", "updates")


def request(inv: Inventory) -> Request:
    """What the audit probe asks a host: the audit facts and every team member's keys."""
    logins = tuple(dict.fromkeys(n.user for n in (*inv.bastions, *inv.hosts)))
    sockets = tuple(dict.fromkeys(f"{s.member}:{s.socket or s.port}" for h in inv.hosts
                                  for s in h.services if s.member))
    return Request(users=tuple(p.name for p in inv.team), facts=AUDIT_FACTS,
                   sshd_users=tuple(dict.fromkeys((*logins, *(p.name for p in inv.team)))),
                   member_sockets=sockets)



@frozen
class HostReport:
    host: str
    ports: tuple[PortReach, ...]
    findings: tuple[Finding, ...]
    drift: tuple[FD.Drift, ...]
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



@frozen
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
    drifts: list[FD.Drift] = []
    fams: tuple[Family, ...] = (4, 6)
    for fam in fams:
        live, d, f = firewall_findings(host, fw, ipt, fam)
        lives[fam] = live
        drifts += d
        found += f
    listeners = facts.get(L.SPEC)
    auth = facts.get(J.SPEC)
    jupyter = auth.answers
    ports = join_ports(inv, host, listeners, lives, sg_rules, facts)
    found += listener_findings(inv, host, ports, listeners)
    found += jupyter_findings(host, jupyter)
    found += member_server_findings(host, auth)
    found += served_findings(host, facts.get(DOOR.SPEC), time.time() if now is None else now)
    gpus = facts.get(GPUS.SPEC)
    found += gpu_findings(host, gpus)
    found += sshd_findings(host, want.sshd, facts.get(SSHD.SPEC), facts.get(SC.SPEC))
    found += key_findings(inv, host, facts)
    found += clock_findings(host, facts.get(TIME.SPEC))
    found += reboot_findings(host, facts.get(UPD.SPEC))
    states = facts.get(TS.SPEC)
    found += socket_findings(host, states, SYS.port_range(facts.get(SYS.SPEC)))
    published: tuple[D.Published, ...] = facts.get(D.SPEC)
    docker_rows, docker_found = docker_findings(inv, host, published, lives, sg_rules)
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
