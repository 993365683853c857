"""`provision audit`: live exposure, drift and socket report. CLI only: parse, call, print.

One probe per host (hosts in parallel, `provision.hosts.gather.gather_many`), the pure join
in `provision.exposure.join` (reported by `provision.exposure.live`), and the security
groups of `aws` read with describe calls only.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from provision import cluster_matrix as CM
from provision.errors import Exit, UsageError
from provision.exposure import Finding, live
from provision.exposure.join import SgRule, Side, declared_sg_rules, sg_rule
from provision.exposure.live import HostReport
from provision.headline import audit_line
from provision.hosts.cluster_probe import measure
from provision.hosts.gather import HostFacts, gather_many, in_background
from provision.inventory.model import Host, Inventory
from provision.text import printable as p

from .common import EXIT_FAILED, EXIT_OK, console, emit_json, inventory_option, json_option, load

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_REACH_STYLE = {"internet": "bold red", "undeclared": "red", "declared": "yellow", "jump": "green",
                "host": "green", "nowhere": "dim"}


@click.command("audit")
@click.argument("hosts", nargs=-1)
@inventory_option
@json_option
@click.option("--accept-new", is_flag=True, help="trust host keys seen for the first time")
@click.option("--forks", type=click.IntRange(1, 200), default=20, show_default=True,
              help="hosts audited at once")
@click.option("--aws/--no-aws", "use_aws", default=True, show_default=True,
              help="read the attached security groups from AWS (describe calls only); "
                   "--no-aws joins the groups as the inventory declares them")
@click.option("--profile", default=None, help="AWS profile")
@click.option("--cluster", "cluster_name", default=None, metavar="NAME",
              help="measure every pair of the cluster's members instead (iperf3 on the hosts): "
                   "rendezvous and ephemeral ports reachable, round-trip time, TCP bandwidth; "
                   "and the bastions in front of them shut out")
@click.option("--plot", "plot_path", default=None, metavar="FILE", type=click.Path(dir_okay=False),
              help="with --cluster: write the pairs' bandwidth as a heat-map PNG")
@click.option("--seconds", type=click.FloatRange(0.5, 60), default=3.0, show_default=True,
              help="with --cluster: how long each pair's bandwidth is measured")
def audit_cmd(hosts: tuple[str, ...], inventory_path: str | None, as_json: bool, accept_new: bool,
              forks: int, use_aws: bool, profile: str | None, cluster_name: str | None,
              plot_path: str | None, seconds: float) -> None:
    """What is reachable on each host from where, what drifted, what the sockets say.

    HOSTS: names, `all`, `bastions` or `role:NAME` (default: every bastion and host).
    With --cluster NAME: the cluster's pairs instead (see --plot).
    Exit 0 when clean (warnings allowed), 1 when an error-level finding exists or a host is
    unreachable (with --cluster: a pair that is not open, or an outsider that is not shut
    out), 2 for a bad inventory or usage.
    """
    inv = load(inventory_path)
    if cluster_name is not None:
        if hosts:
            raise UsageError("--cluster measures the cluster's members: name no HOSTS")
        _cluster(inv, cluster_name, as_json, accept_new, seconds, plot_path)
    if plot_path is not None:
        raise UsageError("--plot goes with --cluster NAME")
    try:
        nodes = inv.select(list(hosts)) if hosts else (*inv.bastions, *inv.hosts)
    except KeyError as e:
        raise UsageError(f"no host, bastion or role matches {e.args[0]!r}") from None
    started = time.monotonic()
    probes = in_background(lambda: gather_many(inv, list(nodes), live.request(inv), accept_new, forks))
    # while the probes are on the wire: render what they are compared with, the declared
    # layer and the security groups (describe calls)
    try:
        want = {n.name: live.expected(inv, n) for n in nodes}
        declared = live.declared_findings(inv)
        sg = _security_groups(inv, nodes, use_aws, profile)
    finally:
        gathered = probes.result()
    reports: list[tuple[HostFacts, HostReport | None]] = []
    for g in gathered:
        rep = None if g.facts is None else live.report(inv, g.host, g.facts, sg.get(g.host.name),
                                                        want[g.host.name])
        reports.append((g, rep))
    wall = time.monotonic() - started
    failed = any(rep is None for _, rep in reports) or any(
        f.severity == "error" for _, rep in reports if rep for f in rep.findings) or any(
        f.severity == "error" for f in declared)
    status = EXIT_FAILED if failed else EXIT_OK
    if as_json:
        emit_json({
            "inventory": inv.source, "ok": status == EXIT_OK, "seconds": round(wall, 3),
            "security_groups": sg.source,
            "declared": [f.__dict__ for f in declared],
            "hosts": [{**(rep.to_json() if rep else {"host": g.host.name, "findings": [],
                                                      "ports": [], "drift": []}),
                       "status": "unreachable" if rep is None else _host_status(rep),
                       "error": g.error or None, "seconds": round(g.seconds, 3),
                       "remote_execs": g.remote_execs}
                      for g, rep in reports],
        })
        raise Exit(status)
    _print(inv, reports, declared, sg.source, wall)
    raise Exit(status)


def _cluster(inv: Inventory, name: str, as_json: bool, accept_new: bool, seconds: float,
             plot_path: str | None) -> None:
    cluster = inv.cluster(name)
    if cluster is None:
        known = ", ".join(c.name for c in inv.clusters) or "none in the inventory"
        raise UsageError(f"no cluster {name!r} (clusters: {known})")
    started = time.monotonic()

    def progress(probe: CM.Probe, r: CM.Result) -> None:
        if not as_json:
            extra = f" {r.gbps:.2f} Gb/s {r.rtt_ms or 0:.2f} ms" if r.gbps is not None else ""
            console(stderr=True).print(Text.assemble(
                f"  {p(probe.source)} -> {p(probe.target)} port {probe.port} ({probe.kind}): "
                f"{r.reach}{extra} ", ("ok", "green") if r.ok else ("FAIL", "bold red")))

    results = measure(inv, cluster, seconds=seconds, accept_new=accept_new, progress=progress)
    failed = CM.failures(results)
    if plot_path is not None:
        from provision.cluster_plot import plot  # matplotlib: only when a plot is asked for

        plot(cluster, results, Path(plot_path))
    status = EXIT_FAILED if failed else EXIT_OK
    if as_json:
        emit_json({"cluster": cluster.name, "ok": not failed,
                   "seconds": round(time.monotonic() - started, 3),
                   "results": [r.to_json() for r in results], "failures": failed,
                   "plot": plot_path})
        raise Exit(status)
    rows = CM.matrix(cluster, results)
    table = Table(title=f"cluster {p(cluster.name)}: every pair (rendezvous {cluster.rendezvous}, "
                        f"ephemeral {CM.ephemeral_port(cluster)})")
    for h in rows[0]:
        table.add_column(p(h))
    for row in rows[1:]:
        table.add_row(*(Text(p(c), style="bold red" if c.endswith("FAIL") else "") for c in row))
    console().print(table)
    for f in failed:
        console().print(Text(p(f), style="bold red"))
    if plot_path is not None:
        console().print(f"heat map: {p(plot_path)}", highlight=False)
    raise Exit(status)


def _host_status(rep: HostReport) -> str:
    c = rep.counts()
    return "error" if c["error"] else "warning" if c["warning"] else "ok"


class _Groups(dict[str, tuple[SgRule, ...] | None]):
    source: str = "none"


def _security_groups(inv: Inventory, nodes: Sequence[Host], use_aws: bool,
                     profile: str | None) -> _Groups:
    """Host name -> SgRules of its attached groups (live from AWS, or as declared)."""
    out = _Groups()
    attached = [n for n in nodes if n.security_groups]
    if inv.aws is None or not attached:
        return out
    if not use_aws:
        for n in attached:
            out[n.name] = declared_sg_rules(inv, n)
        out.source = "inventory"
        return out
    from provision.cloud import aws  # boto3, ~0.3 s: only when the groups are read

    ec2 = aws.client(inv.aws, profile)
    live = {g.name: g for g in aws.fetch(ec2, inv.aws.security_groups)}
    names = {g.id: g.name for g in live.values()}  # a referenced group by its inventory name
    for n in attached:
        out[n.name] = tuple(sg_rule(inv, name, r.key.protocol, r.key.from_port, r.key.to_port, r.key.peer, names)
                            for name in n.security_groups if name in live
                            for r in live[name].rules if not r.key.egress)
    out.source = "aws"
    return out


def _print(inv: Inventory, reports: list[tuple[HostFacts, HostReport | None]],
           declared: Sequence[Finding], sg_source: str, wall: float) -> None:
    """The report. Listener addresses, process names, drift and errors are a host's own
    output, findings quote the inventory: every one goes through `printable`, into Text
    (the console interprets no markup)."""
    def styled(text: str, style: str) -> Text:
        return Text(p(text), style=style)

    out = console()
    worst = sorted(reports, key=lambda gr: (gr[1] is not None,
                                            -(gr[1].counts()["error"] if gr[1] else 0),
                                            -(gr[1].counts()["warning"] if gr[1] else 0)))
    for g, rep in worst:
        if rep is None:
            out.print(styled(f"{g.host.name}: unreachable", "bold red") + Text(f" {p(g.error)}"),
                      soft_wrap=True)
            continue
        out.print(Text("\n") + styled(rep.host, "bold"))
        if rep.gpus:
            out.print(Text(p(rep.gpus)), soft_wrap=True)  # nvidia-smi's names: the host's text
        ports = Table(show_header=True, header_style="bold", expand=False, title=None)
        for col in ("port", "listens", "process", "declared", "IPv4", "IPv6", "SG", "tunnel", "reach"):
            ports.add_column(col, overflow="fold")
        for port in rep.ports:
            ports.add_row(f"{port.port}/{p(port.proto)}",
                          "\n".join(p(x) for x in port.listeners) or "-", p(port.process) or "-",
                          p(port.declared) or "-", _side(port.v4), _side(port.v6), p(port.sg) or "-",
                          "yes" if port.tunnel else "-",
                          styled(port.level, _REACH_STYLE.get(port.level, "")))
        out.print(ports)
        for d in rep.drift:
            out.print(styled("drift", "bold") + Text(f" {p(d.describe())}"), soft_wrap=True)
        if rep.findings:
            t = Table(show_header=True, header_style="bold", expand=False)
            for col in ("severity", "where", "finding", "fix"):
                t.add_column(col, overflow="fold")
            for f in rep.findings:
                t.add_row(styled(f.severity, _STYLE[f.severity]), p(f.subject), p(f.message), p(f.fix))
            out.print(t)
    if declared:
        out.print(Text("\n") + styled("declared", "bold")
                  + Text(f" (as `provision check` reports for {p(inv.source)})"))
        t = Table(show_header=True, header_style="bold", expand=False)
        for col in ("severity", "where", "finding"):
            t.add_column(col, overflow="fold")
        for f in declared:
            t.add_row(styled(f.severity, _STYLE[f.severity]), p(f.subject), p(f.message))
        out.print(t)
    out.print("")
    for g, rep in worst:
        if rep is None:
            out.print(Text(f"{p(g.host.name)}: ") + styled("unreachable", "bold red")
                      + Text(f" ({p(g.error)})"), soft_wrap=True)
            continue
        c = rep.counts()
        exposed = sum(1 for port in rep.ports if port.level in ("undeclared", "internet"))
        word = (styled("error", "bold red") if c["error"] else styled("warning", "yellow")
                if c["warning"] else styled("ok", "green"))
        out.print(Text(f"{p(rep.host)}: ") + word
                  + Text(f" — {c['error']} errors, {c['warning']} warnings, {c['info']} info; "
                         f"{len(rep.ports)} ports, {exposed} beyond declared; {len(rep.drift)} drift; "
                         f"{sum(rep.tcp_states.values())} TCP sockets; {g.seconds:.2f} s"),
                  soft_wrap=True)
    out.print(audit_line(len(reports), sum(1 for _, rep in reports if rep is None), wall,
                         p(sg_source)), soft_wrap=True)


def _side(side: Side) -> str:
    if not side.bound:
        return "-"
    if not side.sources:
        return "dropped"
    shown = ", ".join(side.sources[:3]) + (" …" if len(side.sources) > 3 else "")
    return p(shown)
