"""`provision audit`: live exposure, drift and socket report. CLI only: parse, call, print.

One probe per host (hosts in parallel, `provision.hosts.gather.gather_many`), the pure join
in `provision.exposure.live`, and the security groups of `aws` read with describe calls only.
"""

from __future__ import annotations

import time
from typing import Any

import click

from provision.errors import Exit, UsageError

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
def audit_cmd(hosts: tuple[str, ...], inventory_path: str | None, as_json: bool, accept_new: bool,
              forks: int, use_aws: bool, profile: str | None) -> None:
    """What is reachable on each host from where, what drifted, what the sockets say.

    HOSTS: names, `all`, `bastions` or `role:NAME` (default: every bastion and host).
    Exit 0 when clean (warnings allowed), 1 when an error-level finding exists or a host is
    unreachable, 2 for a bad inventory or usage.
    """
    from provision.exposure import live
    from provision.hosts.gather import gather_many, in_background

    inv = load(inventory_path)
    try:
        nodes = inv.select(list(hosts)) if hosts else (*inv.bastions, *inv.hosts)
    except KeyError as e:
        raise UsageError(f"no host, bastion or role matches {e.args[0]!r}") from None
    started = time.monotonic()
    probes = in_background(lambda: gather_many(inv, list(nodes), live.request(inv), accept_new, forks))
    # while the probes are on the wire: render what they are compared with, the declared
    # layer, the security groups (describe calls), and the output's imports
    try:
        want = {n.name: live.expected(inv, n) for n in nodes}
        declared = live.declared_findings(inv)
        sg = _security_groups(inv, nodes, use_aws, profile)
        if not as_json:
            import rich.table  # noqa: F401
    finally:
        gathered = probes.result()
    reports = []
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


def _host_status(rep: Any) -> str:
    c = rep.counts()
    return "error" if c["error"] else "warning" if c["warning"] else "ok"


class _Groups(dict[str, Any]):
    source: str = "none"


def _security_groups(inv: Any, nodes: Any, use_aws: bool, profile: str | None) -> _Groups:
    """Host name -> SgRules of its attached groups (live from AWS, or as declared)."""
    from provision.exposure.live import declared_sg_rules, sg_rule

    out = _Groups()
    attached = [n for n in nodes if n.security_groups]
    if inv.aws is None or not attached:
        return out
    if not use_aws:
        for n in attached:
            out[n.name] = declared_sg_rules(inv, n)
        out.source = "inventory"
        return out
    from provision.cloud import aws

    ec2 = aws.client(inv.aws, profile)
    live = {g.name: g for g in aws.fetch(ec2, inv.aws.security_groups)}
    names = {g.id: g.name for g in live.values()}  # a referenced group by its inventory name
    for n in attached:
        out[n.name] = tuple(sg_rule(inv, name, r.key.protocol, r.key.from_port, r.key.to_port, r.key.peer, names)
                            for name in n.security_groups if name in live
                            for r in live[name].rules if not r.key.egress)
    out.source = "aws"
    return out


def _print(inv: Any, reports: list[tuple[Any, Any]], declared: Any, sg_source: str, wall: float) -> None:
    """The report. Listener addresses, process names, drift and errors are a host's own
    output, findings quote the inventory: every one goes through `printable`, into Text
    (the console interprets no markup)."""
    from rich.table import Table
    from rich.text import Text

    from provision.text import printable as p

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
    out.print(f"audited {len(reports)} hosts in {wall:.2f} s (security groups: {p(sg_source)})",
              soft_wrap=True)


def _side(side: Any) -> str:
    from provision.text import printable

    if not side.bound:
        return "-"
    if not side.sources:
        return "dropped"
    shown = ", ".join(side.sources[:3]) + (" …" if len(side.sources) > 3 else "")
    return printable(shown)
