"""Listeners' findings (pure): code runners reachable from the internet, undeclared
listeners, declared services not listening or on the wrong address, reach beyond what
the inventory declares."""

from __future__ import annotations

import re
from collections.abc import Sequence

from provision.facts import listeners as L
from provision.finding import Finding
from provision.inventory.model import Host, Inventory

from .internet import covers_internet
from .join import PortReach, Want, reachable_from, wanted_ports

CODE_PROCESSES = re.compile(r"jupyter|tensorboard|ipykernel", re.I)
# Client ports every DHCP-configured server listens on (replies come back to them): never an
# exposure worth a warning; reported as info.
CLIENT_PORTS = {("udp", 68): "DHCP client", ("udp", 546): "DHCPv6 client"}


def listener_findings(inv: Inventory, host: Host, ports: Sequence[PortReach],
                       listeners: Sequence[L.Listener]) -> list[Finding]:
    wanted = wanted_ports(inv, host)
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
                               f"reachable from the internet: {reachable_from(p)}",
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
                                   f"{reachable_from(p)}",
                                   "bind it to 127.0.0.1 unless the cluster's jobs use it, or "
                                   "narrow the cluster's `ports`"))
            elif exposed:
                out.append(Finding("error", "undeclared-listener-exposed", subject,
                                   f"undeclared {', '.join(p.listeners)}{proc} is reachable: {reachable_from(p)}",
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
                    + (f", reachable: {reachable_from(p)}" if wider and exposed else ""),
                    f"restart it with --bind {s.bind} (its unit: {s.unit_name})"))
        if exposed and p.level in ("undeclared", "internet") and not _declared_internet(wants):
            out.append(Finding("error", "exposed-beyond-declared", subject,
                               f"{p.declared}{proc} is reachable beyond what the inventory declares: "
                               f"{reachable_from(p)}",
                               "re-apply the firewall (`provision apply --playbook harden`)"))
    return out


def _declared_internet(wants: Sequence[Want]) -> bool:
    return any(covers_internet(w.sources) for w in wants)


def _same_bind(declared: str, live: str) -> bool:
    if declared == live:
        return True
    if declared == "0.0.0.0":
        return live == "*"
    if declared == "::":
        return live in ("*", "::")
    return False
