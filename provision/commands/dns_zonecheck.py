"""`dns check --zone Z` and `dns apply --verify`: every server, every managed record.

CLI only: the servers come from the zone's provider (as for `dns check NAME`), the
asking from `provision.dns.zonequery`, the judgement from `provision.dns.zonecheck`;
this module prints it (rich: only what disagrees, and a summary) or emits it (--json).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import click
from rich.table import Table
from rich.text import Text

from provision.dns import propagation as prop
from provision.dns.provider import ProviderError, provider_for
from provision.dns.rrset import desired, relative
from provision.dns.zonecheck import TtlFinding, ZoneReport
from provision.dns.zonequery import DEFAULT_IN_FLIGHT, ZoneCheck, check_zone
from provision.errors import OperationError
from provision.inventory.model import Inventory, Zone
from provision.text import printable

from .common import console

F = TypeVar("F", bound=Callable[..., object])


def in_flight_option(f: F) -> F:
    return click.option("--in-flight", type=click.IntRange(1, 256), default=DEFAULT_IN_FLIGHT,
                        show_default=True, metavar="N",
                        help="whole-zone checks: at most N queries outstanding at once")(f)


def targets(zone: Zone, inv: Inventory) -> list[prop.Target]:
    """Every authoritative server of `zone` (its provider's nameservers; none for a
    private zone, which only the resolvers see) and every resolver of `dns.resolvers`;
    OperationError when a nameserver has no address or no server can see the zone."""
    resolvers = inv.dns.resolvers if inv.dns else ()
    try:
        provider = provider_for(zone, inv)
        found, unknown = prop.authoritative_targets(provider.nameservers(), provider.direct,
                                                    resolvers, zone.visibility, zone.name)
    except ProviderError as e:
        raise OperationError(e.message) from None
    if unknown:
        raise OperationError(f"cannot find an address for nameserver {unknown[0]} "
                             "(list a resolver under dns.resolvers)")
    return found + [prop.Target(r, r, "resolver") for r in resolvers]


def check(zone: Zone, inv: Inventory, in_flight: int) -> ZoneCheck:
    return check_zone(zone.name, desired(zone), targets(zone, inv), in_flight=in_flight)


# --- output ---------------------------------------------------------------------------

def _answer(a: prop.Answer) -> str:
    return ", ".join(a.values) if a.values else (a.error or a.status)


def check_json(c: ZoneCheck) -> dict[str, object]:
    r = c.report
    return {
        "zone": r.zone, "ok": r.ok, "queries": c.queries, "seconds": round(c.seconds, 3),
        "queries_per_second": round(c.queries / c.seconds) if c.seconds > 0 else None,
        "servers": [{"server": t.label, "address": t.address, "port": t.port, "role": t.role}
                    for t in r.targets],
        "disagree": list(r.servers_disagreeing),
        # every record; who answers what for those that differ (the others: as expected)
        "records": [{"name": v.name, "type": v.type, "expected": list(v.expected or ()),
                     "ok": v.ok, **({} if v.ok else {
                         "disagree": list(v.disagree), "notes": list(v.notes),
                         "answers": {a.target.label: {"status": a.status, "aa": a.aa,
                                                      "values": list(a.values), "ttl": a.ttl,
                                                      "error": a.error or None}
                                     for a in v.answers}})}
                    for v in r.verdicts],
        "findings": [finding_json(f) for f in r.findings],
    }


def finding_json(f: TtlFinding) -> dict[str, object]:
    return {"name": f.name, "type": f.type, "kind": f.kind, "declared_ttl": f.declared_ttl,
            "served_ttl": f.served_ttl, "servers": list(f.servers), "detail": f.detail}


def print_check(c: ZoneCheck) -> None:
    """A table of the records some server disagrees on (who answers what), the
    findings, and one summary line."""
    out = console()  # every answer, label and note is a server's: escaped
    r = c.report
    n_auth = sum(1 for t in r.targets if t.role == "authoritative")
    rate = f", {c.queries / c.seconds:,.0f}/s" if c.seconds > 0 else ""
    out.print(Text(printable(
        f"zone {r.zone}: {len(r.verdicts)} record(s) asked of {n_auth} authoritative "
        f"server(s) and {len(r.targets) - n_auth} resolver(s): {c.queries} queries in "
        f"{c.seconds:.2f} s{rate}"), style="bold"))
    bad = r.disagreeing
    if bad:
        table = Table(show_header=True, header_style="bold", title="records that differ")
        for col in ("record", "server", "answers", "expected", "why"):
            table.add_column(col)
        for v in bad:
            why = {n.split(" ")[0]: n for n in v.notes}
            for a in v.answers:
                if a.target.label not in v.disagree:
                    continue
                table.add_row(printable(f"{relative(v.name, r.zone)} {v.type}"),
                              printable(a.target.label), printable(_answer(a)),
                              printable(", ".join(v.expected or ()) or "no such record"),
                              printable(why.get(a.target.label, "")))
        out.print(table)
    if r.findings:
        table = Table(show_header=True, header_style="bold", title="TTLs and migrations")
        for col in ("record", "found", "ttl served / declared", "servers", "what to do"):
            table.add_column(col)
        for f in r.findings:
            ttl = f"{_num(f.served_ttl)} / {_num(f.declared_ttl)}"
            table.add_row(printable(f"{relative(f.name, r.zone)} {f.type}"),
                          f.kind.replace("_", " "), ttl, printable(", ".join(f.servers)),
                          printable(f.detail))
        out.print(table)
    out.print(summary(r), style="bold green" if r.ok else "bold red")


def _num(n: int | None) -> str:
    return "-" if n is None else str(n)


def summary(r: ZoneReport) -> Text:
    if r.ok:
        ttls = ("no TTL left low" if any(t.role == "authoritative" for t in r.targets) else
                "served TTLs not compared (only resolvers were asked, and they count TTLs "
                "down)")
        return Text(f"every server serves all {len(r.verdicts)} record(s) as declared; "
                    f"{ttls}, no migration left open")
    parts = []
    if not r.targets:
        parts.append("no server was asked: nothing is verified")
    if r.disagreeing:
        parts.append(f"{len(r.disagreeing)} of {len(r.verdicts)} record(s) differ on "
                     f"{', '.join(r.servers_disagreeing)}")
    if r.findings:
        parts.append(f"{len(r.findings)} TTL/migration finding(s)")
    return Text(printable("; ".join(parts)))


def print_findings(findings: Sequence[TtlFinding], zone: str) -> None:
    """The TTL findings of `dns check NAME`, one line each."""
    out = console()
    for f in findings:
        out.print(Text(printable(f"  ! {relative(f.name, zone)} {f.type}: {f.kind.replace('_', ' ')}: "
                                 f"{f.detail}"), style="bold red"))
