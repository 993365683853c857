"""Cross-layer findings: bind address x host firewall x security group x tunnel.

Pure: an Inventory in, findings out; `provision check` prints them. `provision audit`
prints the same findings beside the live ones of `provision.exposure.live`, which reports
the same layers joined from facts probed on the hosts (`provision.exposure.join`).
"""

from __future__ import annotations

import ipaddress

from provision.finding import Finding, Severity, sort_findings
from provision.inventory.forwards import local_forwards
from provision.inventory.model import Host, Inventory, Service

from .cloud import findings as cloud_findings
from .clusters import findings as cluster_findings
from .dns import dns_findings
from .door import door_findings
from .internet import covers_internet
from .public_address import findings as public_address_findings

__all__ = ["Finding", "Severity", "findings", "sort_findings"]

FEW = 8  # names listed in one finding; a fleet sharing a port would print 10,000 of them


def _few(names: list[str], sep: str) -> str:
    """At most FEW names, then how many more (rendering 10,000 in a table took seconds)."""
    if len(names) <= FEW:
        return sep.join(names)
    return sep.join(names[:FEW]) + f" and {len(names) - FEW:,} more"


def findings(inv: Inventory) -> tuple[Finding, ...]:
    """Cross-layer problems in the inventory, most severe first."""
    out: list[Finding] = []
    for host in (*inv.bastions, *inv.hosts):
        out += _ssh_findings(inv, host)
    for host in inv.hosts:
        for s in host.services:
            out += _service_findings(host, s)
            out += door_findings(host, s)
        out += _port_clashes(host)
    out += _forward_collisions(inv)
    out += cloud_findings(inv)
    out += cluster_findings(inv)
    out += dns_findings(inv)
    out += public_address_findings(inv)
    return sort_findings(out)


def _port_sources(host: Host, port: int) -> list[str]:
    """Every source any public service of `host` admits on `port` (their union is what the
    firewall opens there)."""
    return [c for o in host.services if o.public_port == port and o.expose.kind == "public"
            for c in o.expose.sources]


def _internet_text(sources: list[str]) -> str:
    shown = ", ".join(sources[:6]) + (f" and {len(sources) - 6} more" if len(sources) > 6 else "")
    return f"the internet ({shown}: at least half of the public address space, see exposure/internet.py)"


def _service_findings(host: Host, s: Service) -> list[Finding]:
    subject = f"{host.name}/{s.name}"
    field = f"hosts.{host.name}.services.{s.name}"
    out = []
    if s.expose.kind == "public" and s.is_loopback and s.https is None:  # the door is what listens
        out.append(Finding("warning", "public-but-loopback", subject,
                           f"declared public but bound to {s.bind}: unreachable from {', '.join(s.expose.sources)}",
                           "set bind: 0.0.0.0 (or the host's address), or expose: tunnel", field))
    if s.is_wildcard and s.expose.kind != "public":
        out.append(Finding("warning", "needlessly-exposed", subject,
                           f"bound to {s.bind} but expose is '{s.expose.kind}': it listens on every interface "
                           "and only the host firewall stands in front of it",
                           "set bind: 127.0.0.1 (tunnels reach loopback)", field))
    if s.expose.kind == "public" and s.runs_code:
        sources = _port_sources(host, s.public_port)
        if covers_internet(sources):
            out.append(Finding("error", "code-exec-public", subject,
                               f"{s.name} runs {s.program}, which runs code for whoever reaches it, "
                               f"and port {s.port} is open to {_internet_text(sources)}",
                               "use expose: tunnel (provision tunnel opens it for the team)", field))
        else:
            out.append(Finding("warning", "code-exec-exposed", subject,
                               f"{s.name} is exposed to {', '.join(s.expose.sources)} instead of a tunnel",
                               "prefer expose: tunnel", field))
    return out


def _ssh_findings(inv: Inventory, host: Host) -> list[Finding]:
    section = "bastions" if host.is_bastion else "hosts"
    key = "allow_ssh_from" if host.is_bastion else "ssh_from"
    out = []
    if covers_internet(host.ssh_from):
        out.append(Finding("warning", "ssh-open-to-world", host.name,
                           f"SSH is open to {_internet_text(list(host.ssh_from))}",
                           f"narrow {key} to your office/VPN ranges" +
                           ("" if host.is_bastion else ", and reach the host through a bastion"),
                           f"{section}.{host.name}.{key}"))
    has_jump = bool(host.jump_chain) and bool(inv.chain(host)[-1].egress)
    if not host.ssh_from and not has_jump:
        why = ("its bastion has no 'egress' addresses" if host.jump_chain
               else "it has no bastion")
        out.append(Finding("error", "no-operator-path", host.name,
                           f"no SSH source is allowed through the firewall ({why} and {key} is empty): "
                           "applying the firewall would lock everyone out",
                           f"add {key}, or give the bastion 'egress' addresses", f"{section}.{host.name}"))
    return out


def _port_clashes(host: Host) -> list[Finding]:
    """Every service against every earlier one on the same port (not only the first)."""
    out = []
    for i, s in enumerate(host.services):
        clash = [o.name for o in host.services[:i] if o.port == s.port and _binds_overlap(o.bind, s.bind)]
        if clash:
            out.append(Finding("error", "port-clash", f"{host.name}/{s.name}",
                               f"port {s.port} on {s.bind} is also used by {', '.join(clash)} on {host.name}",
                               "give one of them another port", f"hosts.{host.name}.services.{s.name}.port"))
    return out


def _binds_overlap(a: str, b: str) -> bool:
    ia, ib = ipaddress.ip_address(a), ipaddress.ip_address(b)
    if ia.is_unspecified or ib.is_unspecified:
        return ia.version == ib.version or a == "::" or b == "::"
    return ia == ib


def _forward_collisions(inv: Inventory) -> list[Finding]:
    """LocalForwards in the rendered ssh_config use the remote port as the local port."""
    users: dict[int, list[str]] = {}
    for host in inv.hosts:
        for fwd in local_forwards(host):
            users.setdefault(fwd.local_port, []).append(f"{host.name}/{fwd.service}")
    out = []
    for port, who in sorted(users.items()):
        hosts = {w.split("/")[0] for w in who}
        if len(who) > 1:
            same_host = len(hosts) < len(who)
            out.append(Finding("error" if same_host else "warning", "forward-collision", _few(who, ", "),
                               f"{_few(who, ' and ')} all forward local port {port} in the rendered ssh_config"
                               + ("" if same_host else ": `ssh` to these hosts cannot run at the same time"),
                               "use `provision tunnel HOST` (it picks free local ports), or give the services "
                               "distinct ports"))
    return out
