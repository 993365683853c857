"""`provision dns plan|apply|check`: DNS records from the inventory, and what servers answer.

CLI only: parse, call `provision.dns.sync` / `provision.dns.propagation`, print through
the shared plan output. Exit codes: 0 ok, 1 provider/API failure (or a server that
disagrees, for `check`), 2 bad input, 3 `plan --detailed-exitcode` with changes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, TypeVar

import click
from rich.table import Table
from rich.text import Text

from provision.dns import propagation as prop
from provision.dns.markers import marker_name
from provision.dns.migrate.guard import Review
from provision.dns.propagation import Verdict
from provision.dns.provider import ProviderError
from provision.dns.rrset import RRset, desired, relative
from provision.dns.sync import Options, ZoneRun, apply_zone, plan_zones, select_zones
from provision.dns.zone_plan import RecordChange, marker_changes
from provision.dns.zonequery import check_zone
from provision.dnsdata import names
from provision.dnsdata.endpoint import is_own
from provision.dnsdata.providers import capabilities
from provision.dnsdata.rdata import MANAGED_TYPES
from provision.errors import EXIT_FAILED, EXIT_OK, Exit, OperationError, UsageError
from provision.interrupt import EXIT_INTERRUPTED, Stop, asking, stopping
from provision.inventory.model import Inventory, Zone
from provision.text import printable

from . import dns_stop
from . import dns_zonecheck as zc
from .common import console, echo, emit_json, inventory_option, json_option, load
from .plan_output import Change, Op, Section, exit_status, print_plan, to_json

F = TypeVar("F", bound=Callable[..., object])


@click.group("dns")
def dns_group() -> None:
    """DNS records as code (every provider in provision.dnsdata.providers) and propagation
    checks."""


def _zone_option(f: F) -> F:
    return click.option("--zone", "zones", multiple=True, metavar="ZONE",
                        help="only this zone (repeatable; default: every zone)")(f)


# --- plan / apply -------------------------------------------------------------------

def _allow_revert_option(f: F) -> F:
    return click.option(
        "--allow-revert", "allow_revert", multiple=True, metavar="NAME",
        help="put NAME back to a value a finished migration moved it away from (its closed "
             "record goes; repeatable)")(f)


def _no_migrate_option(f: F) -> F:
    return click.option("--no-migrate", is_flag=True,
                        help="apply value changes of records whose TTL is above the zone's "
                             "cutover_above_ttl as plain changes (caches may keep the old "
                             "value for that TTL) instead of leaving them to `dns migrate run`")(f)


def _subject(rr: RRset, zone: str) -> str:
    return f"{relative(rr.name, zone)} {rr.type}"


def _change(c: RecordChange, zone: str, markers: set[str]) -> Change:
    rr = c.new or c.old
    assert rr is not None  # a change has an old or a new RRset, or both
    detail: list[str] = []
    op: Op
    if c.new is not None and c.old is None:
        subject = f"{_subject(rr, zone)} {', '.join(rr.values)} (ttl {rr.ttl})"
        op = "+"
    elif c.new is None and c.old is not None:
        subject = f"{_subject(rr, zone)} {c.old.describe()}"
        op = "-"
    else:
        assert c.old is not None and c.new is not None
        subject = _subject(rr, zone)
        op = "~"
        if c.old.alias is not None:
            detail.append(f"was: {c.old.describe()}")
            detail.append(f"now: {', '.join(c.new.values)} ttl {c.new.ttl}")
        else:
            if c.old.values != c.new.values:
                detail.append(f"values: {', '.join(c.old.values)} -> {', '.join(c.new.values)}")
            if c.old.ttl != c.new.ttl:
                detail.append(f"ttl: {c.old.ttl} -> {c.new.ttl}")
    if marker_name(rr.name, zone) in markers:
        detail.append(f"ownership marker {marker_name(rr.name, zone)} TXT written")
    return Change(op, subject, tuple(detail), kind="rrset")


def zone_endpoint(zone: Zone, inv: Inventory | None) -> str | None:
    """The API endpoint credentials for `zone` go to, when it is not the provider's own."""
    aws = inv.aws.endpoint_url if inv is not None and inv.aws is not None else None
    url = zone.settings.credentials_url(aws)
    if url is None or is_own(url, capabilities(zone.provider).own_api_hosts):
        return None
    return str(url)


def _zone_title(zone: Zone, inv: Inventory | None) -> str:
    url = zone_endpoint(zone, inv)
    if not url:
        return f"zone {zone.name} ({zone.provider})"
    if not capabilities(zone.provider).own_api_hosts:  # a server the operator runs
        return f"zone {zone.name} ({zone.provider} at {url})"
    # a reviewer sees where the credentials go
    return f"zone {zone.name} ({zone.provider} at {url}: not {zone.provider}'s own endpoint)"


def _sections(runs: Sequence[ZoneRun], force: bool,
              inv: Inventory | None = None) -> list[Section]:
    out = []
    for run in runs:
        name = _zone_title(run.zone, inv)
        if run.error:
            out.append(Section(name, error=run.error, status="failed"))
            continue
        plan = run.plan
        assert plan is not None  # a run without an error has its plan
        if plan.refused:
            out.append(Section(name, error="; ".join(plan.errors), status="refused"))
            continue
        markers = set(marker_changes(plan))
        held = _held(run)
        rv = run.review
        # cutovers and refused reverts are shown as changes, not again as notes
        shown = {rv.hold[k] for k in rv.hold if k in _held_keys(rv)} if rv else set()
        notes = [n for n in plan.notes if n not in shown] + list(rv.notes if rv else ())
        if plan.guard:
            notes.append(plan.guard if not force else plan.guard.split(";")[0] + " (--force given)")
        if run.replanned:
            notes.append("the zone changed between read and write: re-read and re-planned once")
        out.append(Section(name, (*(_change(c, plan.zone, markers) for c in plan.changes),
                                  *held), notes=tuple(notes)))
    return out


def _held(run: ZoneRun) -> list[Change]:
    """What the migration guard took out of the plan (cutovers, refused reverts) and the
    closed migrations' records that apply deletes: shown as changes, so that a plan with
    them is never "no changes"."""
    out: list[Change] = []
    assert run.plan is not None
    rv, zone = run.review, run.plan.zone
    if rv is None:
        return out
    for c in rv.cutovers:
        if c.old_type:
            out.append(Change("~", f"{relative(c.name, zone)} {c.old_type} -> {c.type}", (
                rv.hold[(c.name, c.type)],), kind="cutover"))
            continue
        out.append(Change("~", f"{relative(c.name, zone)} {c.type}", (
            f"a cutover: run `provision dns migrate run {relative(c.name, zone)}`",
            f"values: {', '.join(c.old)} -> {', '.join(c.new)} (ttl {c.ttl} s in the zone, "
            f"above {c.threshold} s; dns apply leaves it alone, --no-migrate applies it)"),
            kind="cutover"))
    for msg in rv.reverts:
        out.append(Change("~", msg.split(" was moved ")[0], (f"refused: {msg}",), kind="revert"))
    for key in rv.bad:
        out.append(Change("~", f"{relative(key[0], zone)} {key[1]}", (rv.hold[key],),
                          kind="held"))
    for rr in run.plan.expired:
        out.append(Change("-", f"{relative(rr.name, zone)} TXT", (
            "a closed migration's record, expired",), kind="closed-migration"))
    return out


def _held_keys(rv: Review) -> set[tuple[str, str]]:
    keys = {(c.name, c.type) for c in rv.cutovers} | set(rv.bad)
    keys |= {(c.name, c.old_type) for c in rv.cutovers if c.old_type}
    return keys | {k for k, why in rv.hold.items() if any(why.endswith(m) for m in rv.reverts)}


def _refuse_reverts(runs: Sequence[ZoneRun]) -> None:
    """Exit 2 when a plan would set a record back to the values a finished migration moved
    it away from (after the plan was shown; --allow-revert NAME takes it out of `reverts`)."""
    reverts = [m for r in runs if r.review is not None for m in r.review.reverts]
    if reverts:
        raise UsageError("; ".join(reverts))


def _refuse_bad_markers(runs: Sequence[ZoneRun]) -> None:
    """Exit 2 when a zone holds markers provision cannot read (bad input from the zone):
    the records they cover were left alone, so the zone is not what the inventory says."""
    errors = [f"zone {r.zone.name}: {e}" for r in runs if r.review is not None
              for e in r.review.errors]
    if errors:
        raise UsageError("; ".join(errors))


def _setup(inventory_path: str | None, zones: tuple[str, ...]) -> tuple[Inventory, list[Zone]]:
    inv = load(inventory_path)
    if inv.dns is None or not inv.dns.zones:
        raise UsageError(f"{inv.source}: no dns.zones in the inventory")
    try:
        return inv, select_zones(inv, zones)
    except KeyError as e:
        known = ", ".join(z.name for z in inv.dns.zones)
        raise UsageError(f"unknown zone {e.args[0]!r} (zones: {known})") from None


@dns_group.command("plan")
@inventory_option
@_zone_option
@click.option("--detailed-exitcode", is_flag=True, help="exit 3 when there are changes")
@click.option("--force", is_flag=True, help="plan as if --force were given to apply (30 % "
              "guard)")
@_no_migrate_option
@_allow_revert_option
@json_option
def plan_cmd(inventory_path: str | None, zones: tuple[str, ...], detailed_exitcode: bool,
             force: bool, no_migrate: bool, allow_revert: tuple[str, ...],
             as_json: bool) -> None:
    """Show the record changes apply would make, per zone."""
    inv, selected = _setup(inventory_path, zones)
    runs = plan_zones(inv, selected, opts=Options(force=force, no_migrate=no_migrate,
                                                  allow_revert=allow_revert))
    sections = _sections(runs, force, inv)
    if as_json:
        emit_json({**to_json(sections), "zones": [_run_json(r, inv) for r in runs]})
    else:
        print_plan(sections, title="dns plan", noun="zone")
    _refuse_reverts(runs)
    _refuse_bad_markers(runs)
    raise Exit(exit_status(sections, detailed_exitcode))


def _run_json(run: ZoneRun, inv: Inventory | None = None) -> dict[str, object]:
    rv = run.review
    return {"zone": run.zone.name, "provider": run.zone.provider, "error": run.error or None,
            "endpoint": zone_endpoint(run.zone, inv),
            "cutovers": [{"name": c.name, "type": c.type, "old": list(c.old), "new": list(c.new),
                          "ttl": c.ttl} for c in (rv.cutovers if rv else ())],
            "reverts_refused": list(rv.reverts) if rv else [],
            "expired": [rr.name for rr in run.plan.expired] if run.plan else [],
            "records_read": run.records_read, "read_seconds": round(run.read_seconds, 4),
            "guard": (run.plan.guard or None) if run.plan else None,
            "applied": run.applied, "replanned": run.replanned,
            "apply_seconds": round(run.apply_seconds, 4)}


@dns_group.command("apply")
@inventory_option
@_zone_option
@click.option("--yes", "-y", is_flag=True, help="do not ask before applying")
@click.option("--force", is_flag=True, help="apply even when more than 30 % of a zone's "
              "managed records change or go")
@_no_migrate_option
@_allow_revert_option
@click.option("--timeout", type=click.FloatRange(1, 3600), default=120.0, show_default=True,
              metavar="SECONDS", help="how long to wait until the change is served")
@click.option("--verify", is_flag=True, help="then ask every authoritative server and "
              "resolver for every record of the zone, as `dns check --zone` (exit 1 when "
              "one disagrees)")
@zc.in_flight_option
@json_option
def apply_cmd(inventory_path: str | None, zones: tuple[str, ...], yes: bool, force: bool,
              no_migrate: bool, allow_revert: tuple[str, ...], timeout: float,
              verify: bool, in_flight: int, as_json: bool) -> None:
    """Apply the record changes, each zone in one atomic change, and wait until served."""
    if not yes and not sys.stdin.isatty():
        raise UsageError("dns apply asks for confirmation, and stdin is not a terminal; "
                         "review `provision dns plan`, then run dns apply with --yes")
    inv, selected = _setup(inventory_path, zones)
    opts = Options(force=force, no_migrate=no_migrate, allow_revert=allow_revert)
    where = dns_stop.Zones()
    stop = Stop(lambda line: echo(line, err=True), lambda: dns_stop.stopping_line(where),
                lambda: dns_stop.leaving_lines(where))
    with stopping(stop):  # Ctrl-C: the zone in flight finishes, no other starts
        runs = plan_zones(inv, selected, opts=opts)
        if stop.requested:  # read only
            echo("interrupted (Ctrl-C) while reading the zones; nothing changed", err=True)
            raise Exit(EXIT_INTERRUPTED)
        failed, skipped = _apply_all(inv, runs, opts, yes=yes, force=force, timeout=timeout,
                                     as_json=as_json, stop=stop, where=where)
    if stop.requested:
        if as_json:
            emit_json({**to_json(_sections(runs, force, inv)), "interrupted": True,
                       "zones": [{**_run_json(r, inv), "not_started": any(r is k for k in skipped)}
                                 for r in runs]})
        echo(dns_stop.interrupted_line([r.zone.name for r in runs if r.applied],
                                       [r.zone.name for r in runs if r.error],
                                       [r.zone.name for r in skipped]), err=True)
        raise Exit(EXIT_INTERRUPTED)
    cutovers = [c for r in runs if r.review is not None for c in r.review.cutovers
                if not c.old_type]  # type changes are said in the plan
    if cutovers and not as_json:
        echo(f"left alone: {len(cutovers)} cutover(s), each for `provision dns migrate run "
             f"NAME` ({', '.join(relative(c.name, r.zone.name) for r in runs if r.review for c in r.review.cutovers if not c.old_type)}), "
             "or apply them as plain changes with --no-migrate")
    checks = [zc.check(r.zone, inv, in_flight) for r in runs
              if verify and not r.error and r.plan is not None and not r.plan.refused]
    if not as_json:
        for c in checks:
            zc.print_check(c)
    failed = failed or not all(c.report.ok for c in checks)
    if as_json:
        emit_json({**to_json(_sections(runs, force, inv)), "zones": [_run_json(r, inv) for r in runs],
                   **({"verify": [zc.check_json(c) for c in checks]} if verify else {})})
    _refuse_bad_markers(runs)  # the rest was applied; what they hold was not
    raise Exit(EXIT_FAILED if failed else EXIT_OK)


def _apply_all(inv: Inventory, runs: list[ZoneRun], opts: Options, *, yes: bool, force: bool,
               timeout: float, as_json: bool, stop: Stop,
               where: dns_stop.Zones) -> tuple[bool, list[ZoneRun]]:
    """Print the plan, refuse what must be, ask, apply zone by zone (none starts after
    Ctrl-C). Returns whether something failed, and the zones Ctrl-C left unapplied."""
    sections = _sections(runs, force, inv)
    if not as_json:
        print_plan(sections, title="dns apply", noun="zone")
    _refuse_reverts(runs)  # before anything is applied, in any zone
    guards = [r.plan.guard for r in runs if r.plan is not None and r.plan.guard]
    if guards and not force:
        raise UsageError("; ".join(guards))
    pending = [r for r in runs if r.plan is not None and not r.plan.refused and r.plan.change_set]
    n = sum(len(r.plan.changes) for r in pending if r.plan is not None)
    if pending and not yes and not stop.requested:
        try:
            with asking():
                go = click.confirm(f"apply {n} record change(s) to {len(pending)} zone(s)?",
                                   default=False, err=True)
        except click.Abort:  # Ctrl-C (or end of input) at the question
            echo("\ndns apply cancelled; nothing changed", err=True)
            raise Exit(EXIT_INTERRUPTED) from None
        if not go:
            raise OperationError("apply cancelled; nothing changed")
    failed = any(bool(r.error) or (r.plan is not None and r.plan.refused) for r in runs)
    where.waiting = [r.zone.name for r in pending]
    skipped: list[ZoneRun] = []
    for run in pending:
        where.waiting.remove(run.zone.name)
        if stop.requested:
            skipped.append(run)
            continue
        where.current = run.zone.name
        try:
            apply_zone(run, timeout=timeout, force=force, opts=opts)
        except ProviderError as e:
            run.error = e.message
            failed = True
        where.current = ""
        if not as_json:
            _print_applied(run)
    if skipped and not as_json:
        for run in skipped:
            echo(f"{run.zone.name}: {dns_stop.NOT_APPLIED}")
    return failed, skipped


def _print_applied(run: ZoneRun) -> None:


    out = console()
    if run.error:
        out.print(Text(printable(f"{run.zone.name}: apply failed: {run.error}"), style="bold red"))
        return
    assert run.plan is not None
    n = len(run.plan.changes)
    how = capabilities(run.zone.provider).served()
    again = " (after re-reading the changed zone once)" if run.replanned else ""
    out.print(Text(f"{run.zone.name}: applied {n} change{'s' if n != 1 else ''}{again}, {how} "
                   f"in {run.apply_seconds:.2f} s", style="bold green"))


# --- check --------------------------------------------------------------------------

@dns_group.command("check")
@click.argument("name", required=False)
@inventory_option
@click.option("--zone", "zone_name", default=None, metavar="ZONE",
              help="the zone NAME is in; without NAME, check every record of ZONE")
@click.option("--type", "rtype", type=click.Choice([*MANAGED_TYPES, "NS"], case_sensitive=False),
              default=None, help="record type (default: the inventory's, else A)")
@zc.in_flight_option
@json_option
def check_cmd(name: str | None, inventory_path: str | None, zone_name: str | None,
              rtype: str | None, in_flight: int, as_json: bool) -> None:
    """What every authoritative server of NAME's zone, and every configured resolver,
    answers for NAME: value, remaining TTL, AA flag; who disagrees and why. Without
    NAME, the same for every record the inventory declares in the zone (--zone, or
    every zone), and TTLs left low or migrations left open. Exit 1 when a server
    disagrees or does not answer, or a TTL or migration is found."""
    inv = load(inventory_path)
    zones = list(inv.dns.zones) if inv.dns else []
    if zone_name:
        zones = [z for z in zones if z.name == zone_name.rstrip(".").lower()]
        if not zones:
            raise UsageError(f"unknown zone {zone_name!r}")
    if name is None:
        _check_zones(inv, zones, in_flight, as_json)
    try:  # the same reading of NAME as `dns migrate` (a dotted name is fully qualified)
        zone_key, fq = names.cli_name(name, [z.name for z in zones])
    except names.BadName as e:
        raise UsageError(f"'{printable(name)}' {e}") from None
    zone = next(z for z in zones if z.name == zone_key)
    declared = {rr.type: rr for rr in desired(zone) if rr.name == fq}
    rtype = (rtype or next((t for t in MANAGED_TYPES if t in declared), "A")).upper()
    want = declared.get(rtype)
    expected = want.values if want is not None else None
    targets = zc.targets(zone, inv)
    verdict = prop.assess(fq, rtype, prop.probe(targets, fq, rtype), expected)
    # a declared record's TTL and migration marker, from the zone (as `--zone` does)
    findings = check_zone(zone.name, [want], targets).report.findings if want else ()
    if as_json:
        emit_json({"name": fq, "type": rtype, "expected": list(expected) if expected is not None else None,
                   "ok": verdict.ok and not findings, "disagree": list(verdict.disagree),
                   "notes": list(verdict.notes),
                   "findings": [zc.finding_json(f) for f in findings],
                   "answers": [{"server": a.target.label, "address": a.target.address,
                                "role": a.target.role, "status": a.status, "aa": a.aa,
                                "values": list(a.values), "ttl": a.ttl,
                                "negative_ttl": a.negative_ttl, "error": a.error or None}
                               for a in verdict.answers]})
    else:
        _print_check(verdict)
        zc.print_findings(findings, zone.name)
    raise Exit(EXIT_OK if verdict.ok and not findings else EXIT_FAILED)


def _check_zones(inv: Inventory, zones: Sequence[Zone], in_flight: int, as_json: bool) -> NoReturn:
    """`dns check [--zone Z]` without NAME: every declared record of each zone."""
    if not zones:
        raise UsageError(f"{inv.source}: no dns.zones in the inventory")
    checks = [zc.check(z, inv, in_flight) for z in zones]
    if as_json:
        emit_json({"ok": all(c.report.ok for c in checks),
                   "zones": [zc.check_json(c) for c in checks]})
    else:
        for c in checks:
            zc.print_check(c)
    raise Exit(EXIT_OK if all(c.report.ok for c in checks) else EXIT_FAILED)



def _print_check(v: Verdict) -> None:

    out = console()  # every answer, label and note below is a server's: escaped
    want = ("(no expectation: compared with the authoritative servers)" if v.expected is None
            else ", ".join(v.expected) or "no such record")
    out.print(Text(printable(f"{v.name} {v.type}: expected {want}"), style="bold"))
    table = Table(show_header=True, header_style="bold")
    for col in ("server", "role", "answer", "ttl", "aa", ""):
        table.add_column(col)
    for a in v.answers:
        answer = ", ".join(a.values) if a.values else a.status
        ttl = str(a.ttl) if a.ttl is not None else (
            f"neg {a.negative_ttl}" if a.negative_ttl is not None else "-")
        bad = a.target.label in v.disagree
        server = a.target.label if a.target.label == a.target.address else \
            f"{a.target.label} ({a.target.address})"
        table.add_row(printable(server), printable(a.target.role), printable(answer), ttl,
                      "yes" if a.aa else "no",
                      Text("differs", style="bold red") if bad else Text("ok", style="green"))
    out.print(table)
    for note in v.notes:
        out.print(Text(f"  ! {printable(note)}", style="magenta"))
    out.print(Text("every server agrees" if v.ok else
                   printable(f"{len(v.disagree)} server(s) disagree: {', '.join(v.disagree)}"),
                   style="bold green" if v.ok else "bold red"))


# --- migrate --------------------------------------------------------------------------
from .dns_migrate import migrate_group  # noqa: E402  (a subgroup; imports only click)

dns_group.add_command(migrate_group)
