"""`provision dns migrate start|status|cutover|verify|finalize|rollback|run`.

CLI only: parse, call `provision.dns.migrate.run`, print. Exit codes: 0 done, 1 a
provider/health check/verification failed (the migration stays resumable), 2 bad input
or a refusal (a migration already open, cutover before the old TTL ran out, none open).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any, TypeVar

import click
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from provision.dns.migrate import health_from, report
from provision.dns.migrate import run as R
from provision.dns.migrate.health import Check, parse
from provision.dns.migrate.journal import Journal
from provision.dns.migrate.run import Ctx
from provision.dns.migrate.store import JournalStore
from provision.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Exit, UsageError
from provision.interrupt import EXIT_INTERRUPTED, Stop, stopping
from provision.inventory.model import Host
from provision.text import printable

from . import dns_migrate_stop as words
from .common import console, echo, emit_json, inventory_option, json_option, load

F = TypeVar("F", bound=Callable[..., object])


@click.group("migrate")
def migrate_group() -> None:
    """TTL-lowering cutovers of one record: lower the TTL, wait out the old one,
    health-check, switch, verify everywhere, raise the TTL back. Resumable; the zone
    carries a marker while a migration is open, so nobody forgets one half-done."""


def _say(as_json: bool) -> Callable[[str], None]:
    def say(line: str) -> None:
        echo(line, err=as_json)
    return say


def _ctx(inventory_path: str | None, name: str, as_json: bool, timeout: float = 300.0) -> Ctx:
    inv = load(inventory_path)
    if inv.dns is None or not inv.dns.zones:
        raise UsageError(f"{inv.source}: no dns.zones in the inventory")
    zone, fq = R.find_zone(inv, name)
    return R.Ctx(inv, zone, fq, JournalStore(), say=_say(as_json), timeout=timeout)


def health_from_host(ctx: Ctx, name: str | None, checks: list[Check]) -> Host | None:
    """--health-from checked against the inventory before anything is read or sent."""
    return health_from.source(ctx.inv, name, checks)


@contextlib.contextmanager
def _stoppable(ctx: Ctx, inventory_path: str | None) -> Iterator[Stop]:
    """Ctrl-C while the block changes the migration: the first lets the change in flight
    finish and (`run`) starts no further phase, then says where the journal stands and
    the commands that resume or roll back, exit 130; the second leaves at once, saying the
    same. The block's own errors stand, but the phase is still said."""
    def where() -> list[str]:
        try:
            j = ctx.store.load(ctx.name)
        except Exception:  # the journal is being written: say what can be said
            j = None
        return words.where_lines(ctx.where, ctx.name, j.phase if j else None,
                                 str(ctx.store.path(ctx.name)), inventory_path)

    stop = Stop(lambda line: echo(line, err=True), lambda: words.STOPPING,
                lambda: ["leaving now:", *where()])
    ctx.stopped = lambda: stop.requested
    try:
        with stopping(stop):
            yield stop
    except R.Stopped:
        pass
    finally:
        if stop.requested:
            for line in ["interrupted (Ctrl-C): " + where()[0], *where()[1:]]:
                echo(line, err=True)
    if stop.requested:
        raise Exit(EXIT_INTERRUPTED)


def _journal_json(j: Journal | None) -> dict[str, Any] | None:
    if j is None:
        return None
    d = asdict(j)
    d["history"] = [{"at": t, "event": e} for t, e in j.history]
    return d


def _name_arg(f: F) -> F:
    return click.argument("name")(f)


def _timeout_option(f: F) -> F:
    return click.option("--timeout", type=click.FloatRange(1, 3600), default=300.0,
                        show_default=True, metavar="SECONDS",
                        help="how long to wait for a change to be served")(f)


def _health_option(f: F) -> F:
    return click.option("--health", "health", multiple=True, metavar="tcp:PORT|URL",
                        help="check every new value first: tcp:PORT (connect) or "
                             "http://HOST:PORT/PATH (GET sent to each new value, 2xx); repeatable")(f)


def _health_from_option(f: F) -> F:
    return click.option("--health-from", "health_from", metavar="HOST", default=None,
                        help="run the --health checks from this bastion or host of the "
                             "inventory (its sshd connects, through its jump chain) instead "
                             "of from this machine: for new values only its network "
                             "reaches")(f)


def _checks(specs: tuple[str, ...]) -> list[Check]:
    try:
        return [parse(s) for s in specs]
    except ValueError as e:
        raise UsageError(str(e)) from None


_TO = click.option("--to", "to", multiple=True, metavar="VALUE",
                   help="the new value (repeat for several A/AAAA values); default: the "
                        "values the inventory declares (the zone's are the starting point)")
_NO_WRITE = click.option("--no-write-inventory", "no_write", is_flag=True,
                         help="do not write an ad hoc --to into the inventory file at "
                              "finalize (dns apply then refuses to put the old value back "
                              "while the zone remembers the migration)")
_LOWER = click.option("--lower-ttl", type=click.IntRange(1, 604800), default=60,
                      show_default=True, metavar="SECONDS",
                      help="the TTL during the migration")
_ALLOW_REVERT = click.option(
    "--allow-revert", "allow_revert", is_flag=True,
    help="migrate even to a value a finished migration of NAME moved it away from (its "
         "closed record in the zone)")
_TYPE = click.option("--type", "rtype", type=click.Choice(["A", "AAAA", "CNAME"],
                     case_sensitive=False), default=None,
                     help="which record at NAME (default: the one there)")


@migrate_group.command("start")
@_name_arg
@_TO
@_LOWER
@_TYPE
@_ALLOW_REVERT
@inventory_option
@_timeout_option
@json_option
def start_cmd(name: str, to: tuple[str, ...], lower_ttl: int, rtype: str | None,
              allow_revert: bool, inventory_path: str | None, timeout: float,
              as_json: bool) -> None:
    """Journal the record, re-publish it with the lowered TTL, and wait until every
    authoritative server serves that."""
    ctx = _ctx(inventory_path, name, as_json, timeout)
    ctx.allow_revert = allow_revert
    with ctx.store.lock(ctx.name), _stoppable(ctx, inventory_path):
        j = R.start(ctx, to, lower_ttl, rtype)
    if as_json:
        emit_json({"migration": _journal_json(j), "nothing_to_migrate": j is None,
                   "next": None if j is None else f"provision dns migrate cutover {ctx.where}"})
    raise Exit(EXIT_OK)


@migrate_group.command("status")
@click.argument("name", required=False)
@inventory_option
@json_option
def status_cmd(name: str | None, inventory_path: str | None, as_json: bool) -> None:
    """The phase, the time left, and what each authoritative server and resolver answers
    now. Without NAME: every open migration (local journals and markers in the zones)."""
    inv = load(inventory_path)
    if inv.dns is None or not inv.dns.zones:
        raise UsageError(f"{inv.source}: no dns.zones in the inventory")
    say = _say(as_json)
    if name is not None:  # an empty NAME is a bad name, not "every migration"
        names, problems = [name], list[str]()
    else:
        names, problems = report.open_names(inv, JournalStore())
    out = []
    refused = bool(problems)
    for n in names:
        try:
            zone, fq = R.find_zone(inv, n)
            ctx = R.Ctx(inv, zone, fq, JournalStore(), say=say)
            s = report.status_of(ctx)
        except UsageError as e:
            if name is not None:  # the one name asked for: in no zone, or its journal/marker refused
                raise
            problems.append(e.message)
            refused = True
            continue
        if s is not None:
            out.append(s)
    for p in problems:
        say(f"! {printable(p)}")
    if as_json:
        emit_json(out)
    else:
        _print_status(out, name)
    raise Exit(EXIT_USAGE if refused else
               EXIT_FAILED if any(s["conflict"] for s in out) else EXIT_OK)


def _print_status(items: list[dict[str, Any]], name: str | None) -> None:

    out = console()  # journals, markers and answers are outside data: every string escaped
    if not items:
        out.print(printable(f"no open migration{' of ' + name if name else ''}"))
        return
    for s in items:
        out.print(Text(printable(f"{s['name']} {s['type']}: phase {s['phase']} (started {s['started_at']})"),
                       style="bold"))
        out.print(printable(f"  {', '.join(s['original']['values'])} ttl {s['original']['ttl']} -> "
                    f"{', '.join(s['target']['values'])} (ttl {s['lower_ttl']} during the migration)"))
        if s.get("by"):
            out.print(printable(f"  opened by {s['by']}" + ("" if s.get("mine", True) else " (someone else)")))
        if s["seconds_left"] is not None:
            out.print(printable(f"  {s['seconds_left']:.0f} s left until {s['waiting_for']}"))
        if s["conflict"]:
            out.print(Text(printable(f"  conflict: {s['conflict']}"), style="bold red"))
        table = Table(show_header=True, header_style="bold")
        for col in ("server", "role", "answer", "ttl", "aa", "serves"):
            table.add_column(col)
        for a in s["answers"]:
            table.add_row(printable(a["server"]), printable(a["role"]), printable(", ".join(a["values"]) or a["status"]),
                          "-" if a["ttl"] is None else printable(str(a["ttl"])), "yes" if a["aa"] else "no",
                          printable(str(a["serves"])))
        out.print(table)
        for n in s["notes"]:
            out.print(Text(printable(f"  ! {n}"), style="magenta"))
        if s["next"]:
            out.print(printable(f"  next: {s['next']}"))


@migrate_group.command("cutover")
@_name_arg
@_health_option
@_health_from_option
@click.option("--force", is_flag=True, help="do not wait for the old TTL to run out (caches "
              "may still serve the old value; says for how long)")
@inventory_option
@_timeout_option
@json_option
def cutover_cmd(name: str, health: tuple[str, ...], health_from: str | None, force: bool,
                inventory_path: str | None, timeout: float, as_json: bool) -> None:
    """Health-check every new value, then switch (lowered TTL) and wait until every
    authoritative server serves the new values."""
    checks = _checks(health)
    ctx = _ctx(inventory_path, name, as_json, timeout)
    ctx.health_from = health_from_host(ctx, health_from, checks)
    with ctx.store.lock(ctx.name), _stoppable(ctx, inventory_path):
        j, warning = R.cutover(ctx, checks, force)
    if as_json:
        emit_json({"migration": _journal_json(j), "warning": warning or None,
                   "stale_until": R._iso(j.stale_until)})
    raise Exit(EXIT_OK)


@migrate_group.command("verify")
@_name_arg
@inventory_option
@json_option
def verify_cmd(name: str, inventory_path: str | None, as_json: bool) -> None:
    """Every authoritative server serves the new values (AA, RD off); every configured
    resolver does too. Stale caches are named with their remaining TTL (exit 1)."""
    ctx = _ctx(inventory_path, name, as_json)
    with ctx.store.lock(ctx.name):
        j, v, answers = R.verify(ctx)
    if as_json:
        emit_json({"name": j.name, "ok": v.ok, "authoritative_ok": v.authoritative_ok,
                   "phase": j.phase,
                   "stale": [{"server": s.server, "values": list(s.values), "ttl": s.ttl,
                              "status": s.status} for s in v.stale],
                   "notes": list(v.notes) + ctx.notes,
                   "answers": [{"server": a.target.label, "role": a.target.role,
                                "status": a.status, "aa": a.aa, "values": list(a.values),
                                "ttl": a.ttl} for a in answers]})
    else:
        for a in answers:
            echo(f"  {a.target.label} ({a.target.role}): "
                 f"{', '.join(a.values) or a.status} ttl {a.ttl}")
        for n in [*v.notes, *ctx.notes]:
            echo(f"  ! {n}")
        echo(f"{ctx.where}: verified" if v.ok else
             f"{ctx.where}: not verified: {len(v.stale)} stale resolver(s)"
             f"{'' if v.authoritative_ok else ', authoritative servers disagree'}")
    raise Exit(EXIT_OK if v.ok else EXIT_FAILED)


@migrate_group.command("finalize")
@_name_arg
@click.option("--ttl", type=click.IntRange(1, 604800), default=None, metavar="SECONDS",
              help="the TTL to raise to (default: the inventory's, else the original)")
@_NO_WRITE
@inventory_option
@_timeout_option
@json_option
def finalize_cmd(name: str, ttl: int | None, no_write: bool, inventory_path: str | None,
                 timeout: float, as_json: bool) -> None:
    """Once verified: raise the TTL back (to the inventory's or the original, or --ttl),
    leave a closed migration's record in the zone, write an ad hoc --to into the
    inventory, and close."""
    ctx = _ctx(inventory_path, name, as_json, timeout)
    ctx.write_inventory = not no_write
    with ctx.store.lock(ctx.name), _stoppable(ctx, inventory_path):
        j = R.finalize(ctx, ttl)
    if as_json:
        emit_json({"migration": _journal_json(j), "closed": "finalized",
                   "inventory_written": ctx.written or None})
    else:
        echo(f"{ctx.where}: finalized: {', '.join(j.target_values)} ttl {j.final_ttl}")
    raise Exit(EXIT_OK)


@migrate_group.command("rollback")
@_name_arg
@inventory_option
@_timeout_option
@json_option
def rollback_cmd(name: str, inventory_path: str | None, timeout: float, as_json: bool) -> None:
    """From any phase: restore the original values and TTL exactly, and close."""
    ctx = _ctx(inventory_path, name, as_json, timeout)
    with ctx.store.lock(ctx.name), _stoppable(ctx, inventory_path):
        j, outcome = R.rollback(ctx)
    if as_json:
        emit_json({"migration": _journal_json(j), "closed": outcome})
    else:
        assert j is not None
        echo(f"{ctx.where}: {outcome}: {', '.join(j.original_values)} ttl {j.original_ttl}")
    raise Exit(EXIT_OK)


@migrate_group.command("run")
@_name_arg
@_TO
@_LOWER
@_TYPE
@_health_option
@_health_from_option
@click.option("--final-ttl", type=click.IntRange(1, 604800), default=None, metavar="SECONDS",
              help="the TTL to raise to at the end (default: the inventory's, else the original)")
@_NO_WRITE
@_ALLOW_REVERT
@click.option("--verify-grace", type=click.FloatRange(0, 3600), default=30.0, show_default=True,
              metavar="SECONDS", help="how long past the TTL window resolvers may lag before "
              "run stops (resumable)")
@inventory_option
@_timeout_option
@json_option
def run_cmd(name: str, to: tuple[str, ...], lower_ttl: int, rtype: str | None,
            health: tuple[str, ...], health_from: str | None, final_ttl: int | None,
            no_write: bool,
            allow_revert: bool, verify_grace: float, inventory_path: str | None, timeout: float,
            as_json: bool) -> None:
    """Every phase in one go, waiting with a countdown; stops at the first failure and
    leaves the migration resumable (run it again, or use the single commands)."""
    checks = _checks(health)
    ctx = _ctx(inventory_path, name, as_json, timeout)
    ctx.health_from = health_from_host(ctx, health_from, checks)
    ctx.write_inventory = not no_write
    ctx.allow_revert = allow_revert
    t0 = time.monotonic()
    with ctx.store.lock(ctx.name), _stoppable(ctx, inventory_path) as stop:
        j, timings = R.run_all(ctx, to, lower_ttl, rtype, checks, final_ttl, verify_grace,
                               countdown=_countdown(as_json, lambda: stop.requested))
    if j is None:  # nothing to migrate (said)
        if as_json:
            emit_json({"migration": None, "closed": None, "nothing_to_migrate": True})
        raise Exit(EXIT_OK)
    if as_json:
        emit_json({"migration": _journal_json(j), "closed": "finalized",
                   "inventory_written": ctx.written or None,
                   "seconds": round(time.monotonic() - t0, 2), "timings": timings})
    else:
        echo(f"{ctx.where}: done in {time.monotonic() - t0:.1f} s: "
             f"{', '.join(j.target_values)} ttl {j.final_ttl}")
    raise Exit(EXIT_OK)


def _countdown(as_json: bool, stopped: Callable[[], bool] = lambda: False
               ) -> Callable[[float, str], None]:
    """Wait until the monotonic `deadline`: a progress bar on a terminal, else a plain
    line every 10 s (on stderr with --json). Ctrl-C (`stopped`) ends the wait: it changes
    nothing."""
    def wait(seconds: float, what: str) -> None:
        if seconds <= 0:
            return
        end = time.monotonic() + seconds
        stream = sys.stderr if as_json else sys.stdout
        if stream.isatty():


            with Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                          TimeRemainingColumn(), transient=True,
                          console=console(stderr=as_json)) as prog:
                task = prog.add_task(printable(what), total=seconds)
                while (left := end - time.monotonic()) > 0 and not stopped():
                    prog.update(task, completed=seconds - left)
                    time.sleep(min(0.2, left))
            return
        echo(f"waiting {seconds:.0f} s: {what}", err=as_json)
        last = time.monotonic()
        while (left := end - time.monotonic()) > 0 and not stopped():
            if time.monotonic() - last >= 10:
                echo(f"  {left:.0f} s left", err=as_json)
                last = time.monotonic()
            time.sleep(min(0.2, left))
    return wait
