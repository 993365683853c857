"""The run of `provision plan` and `provision apply` once the hosts are connecting
(`provision.commands.converge` checks the command's input and starts that): probe and
diff every host, ask, apply in waves, and print the plan and the recap.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import getpass
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TypeVar

import click
from rich.table import Table
from rich.text import Text

from provision.errors import Exit
from provision.facts import door as DOOR
from provision.headline import apply_line
from provision.hosts.confirm import execute_guarded
from provision.hosts.converge import (
    Contention,
    HostRun,
    Memory,
    close,
    execute_in_order,
    in_parallel,
    prepare,
)
from provision.hosts.interrupt import EXIT_INTERRUPTED, Stop, asking, stopping
from provision.hosts.lock import Report, Spec, event_text, new_token, operator_id
from provision.hosts.progress import NOT_STARTED, Board, Event
from provision.hosts.reach import Closing
from provision.inventory.model import Host
from provision.playbook import waves
from provision.ssh.connect import Chain, Gateways
from provision.tasks.actions import (
    AptSources,
    EnsureUser,
    Mkdir,
    RemoveFile,
    RemoveTemps,
    WriteFile,
)
from provision.tasks.commit import CommitConfirmed
from provision.tasks.step import Planned
from provision.text import printable as p

from .common import EXIT_FAILED, EXIT_OK, console, echo, emit_json
from .converge import Run
from .live import Display, wanted
from .plan_output import Change, Op, Section, exit_status, print_plan, to_json

STATUS_STYLE = {"ok": "green", "changed": "yellow", "pending": "yellow",
                "failed": "bold red", "unreachable": "bold red", NOT_STARTED: "cyan"}


T = TypeVar("T")


def _unless_stopped(stop: Stop | None, fn: Callable[[T], HostRun],
                    skipped: Callable[[T], HostRun]) -> Callable[[T], HostRun]:
    """`fn`, or `skipped` for a host whose turn comes after the user asked to stop."""
    def go(item: T) -> HostRun:
        return skipped(item) if stop is not None and stop.requested else fn(item)
    return go


def _not_probed(display: Display, host: Host) -> HostRun:
    display.board.feed(Event(host.name, "not-started"))
    return HostRun(host, status=NOT_STARTED,
                   note="stopped (Ctrl-C) before this host was probed: nothing read or changed")


def _not_applied(display: Display, run: HostRun) -> HostRun:
    display.board.feed(Event(run.host.name, "not-started"))
    if run.status == "pending":
        run.status = NOT_STARTED
        run.note = "; ".join(filter(None, [run.note, f"stopped (Ctrl-C) before this host "
                                           f"started: {run.changes} change(s) not applied"]))
    return run


def _told(display: Display, fn: Callable[[T], HostRun]) -> Callable[[T], HostRun]:
    """`fn`, then the board told the host is done (with its status)."""
    def go(item: T) -> HostRun:
        run = fn(item)
        display.board.feed(Event(run.host.name, "done", status=run.status))
        return run
    return go


def _prepare_all(job: Run, forks: int, accept_new: bool, display: Display, keep_pending: bool,
                 gateways: Gateways, early: dict[str, Future[Chain]],
                 closing: Closing, spec: Spec | None = None,
                 stop: Stop | None = None) -> list[HostRun]:
    """Connect and probe every host, `forks` at a time, through the run's shared bastion
    hops. A host's connection is closed as soon as it is probed unless it has changes that
    `apply` will send over it, so a plan or a no-op apply never holds more than `forks`
    channels through a bastion. A host whose connection was started already (`early`,
    taken out of it here) uses that one. When every host has a worker of its own, a
    connection is closed in the background while the run goes on (`closing`, which the
    caller waits for). With a lock
    `spec` (apply) each probe takes the host lock; what it waits for is said on stderr as
    it happens."""
    inv, pb, selected = job.inv, job.pb, job.selected
    def say_lock_event(host: Host, kind: str, report: Report) -> None:
        text = event_text(report, kind, time.time())
        if text:
            display.say(f"{host.name}: {text}")
            if kind in ("busy", "execs", "armed"):
                display.board.feed(Event(host.name, "lock-wait", detail=text))

    contention = None if spec is None else Contention(spec.token, say_lock_event)
    started = time.monotonic()

    def one(round_spec: Spec | None, h: Host) -> HostRun:
        run = prepare(inv, h, pb, accept_new, gateways, round_spec,
                      None if contention is None else contention.on_event,
                      opened=early.pop(h.name, None), say=display.board.feed)
        if contention is not None:
            contention.prepared(run)
        if keep_pending and run.status == "pending":
            return run
        closing.close(functools.partial(close, run), background=len(todo) <= forks)
        return run

    todo, done = list(selected), dict[str, HostRun]()
    round_spec = spec
    while todo:
        with display.phase("gathering facts", [h.name for h in todo]):
            work = _told(display, functools.partial(one, round_spec))
            runs = in_parallel(_unless_stopped(stop, work, functools.partial(_not_probed, display)),
                               todo, forks)
        redo: set[str] = set() if contention is None else contention.take_redo()
        if redo:
            closing.wait()  # a host's own close first, not two at once
        for run in runs:
            if run.host.name in redo:
                close(run)  # let go already; probed again from fresh facts
            else:
                done[run.host.name] = run
        todo = [h for h in selected if h.name in redo]
        if spec is not None:  # the wait is bounded over all rounds, not per round
            left = max(0, spec.timeout - int(time.monotonic() - started))
            round_spec = dataclasses.replace(spec, timeout=left)
    return [done[h.name] for h in selected]


def _lock_spec(timeout: int) -> Spec:
    """Who this run is, for the host lock: `$USER@hostname` of this machine, the command."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name in the environment or the passwd database
        user = "unknown"
    return Spec(operator_id(user, socket.gethostname()), "apply",
                new_token(time.time(), secrets.token_hex(6)), timeout)


# --- output ----------------------------------------------------------------------------

def _file_diff(old: str | None, new: str, path: str) -> tuple[str, ...]:
    return tuple(difflib.unified_diff((old or "").splitlines(keepends=True),
                                      new.splitlines(keepends=True),
                                      fromfile="/dev/null" if old is None else f"a{path}",
                                      tofile=f"b{path}"))


def _change(step: str, a: Planned) -> Change:
    """One planned action as a line of the shared plan output."""
    diff: tuple[str, ...] = ()
    op: Op = "~"
    if isinstance(a, WriteFile):
        diff, op = _file_diff(a.old, a.content, a.path), "+" if a.old is None else "~"
    elif isinstance(a, CommitConfirmed | AptSources):
        diff = tuple(x for w in a.writes for x in _file_diff(w.old, w.content, w.path))
    elif isinstance(a, RemoveFile):
        op = "-"
        if a.old is not None:
            diff = tuple(difflib.unified_diff(a.old.splitlines(keepends=True), [],
                                              fromfile=f"a{a.path}", tofile="/dev/null"))
    elif isinstance(a, RemoveTemps):
        op = "-"
    elif (isinstance(a, EnsureUser) and a.create) or isinstance(a, Mkdir):
        op = "+"
    return Change(op, f"[{step}] {a.describe()}", diff=diff, kind=type(a).__name__)


def sections(runs: list[HostRun]) -> list[Section]:
    return [Section(r.host.name, tuple(_change(step, a) for step, a in r.actions),
                    error=r.error if r.status in ("failed", "unreachable") else "",
                    status=r.status if r.status in ("failed", "unreachable") else "",
                    # a guarded step that will not run says why (its guard is the reason)
                    notes=tuple(f"[{d.step}] skipped: {d.why}"
                                for d in r.decisions if not d.run),
                    # nvidia-smi's view of the host's GPUs (none: no line)
                    info=tuple(x for x in [r.facts.gpus.summary if r.facts else ""] if x))
            for r in runs]


def _print_plan(runs: list[HostRun]) -> None:
    print_plan(sections(runs))


def _print_recap(runs: list[HostRun], title: str) -> None:
    # the playbook's name and a run's error or note (a host's output) came from outside
    t = Table(title=p(title), title_justify="left")
    for col in ("host", "status", "changed", "remote execs", "seconds", "reason"):
        t.add_column(col, justify="right" if col in ("changed", "remote execs", "seconds") else "left")
    for r in runs:
        t.add_row(p(r.host.name), Text(p(r.status.replace("-", " ")),
                                       style=STATUS_STYLE.get(r.status, "")),
                  str(r.done if r.status != "pending" else r.changes), str(r.remote_execs),
                  f"{r.seconds:.2f}", p(r.error or r.note))
    console().print(t)


def _json(runs: list[HostRun], command: str, job: Run, shard: str | None,
          memory: Memory, interrupted: bool = False) -> None:
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.status] = counts.get(r.status, 0) + 1
    emit_json({"command": command, "playbook": job.pb.name, "summary": counts, "shard": shard,
               "control": memory.finish().to_json(),
               "tasks_imported": [i.to_json() for i in job.imported],
               "plan": to_json(sections(runs)), "hosts": [r.to_json() for r in runs],
               "interrupted": interrupted})


def _held(runs: Sequence[HostRun]) -> dict[str, dict[str, str | None]]:
    """host -> door name -> the certificate the run's facts saw there (None: the door's
    placeholder, or none yet)."""
    out: dict[str, dict[str, str | None]] = {}
    for run in runs:
        if run.facts is None or "door" not in run.facts.values:
            continue
        fact = run.facts.get(DOOR.SPEC)
        out[run.host.name] = {
            s.https.name: (None if (c := fact.certs.get(s.https.name)) is None or c.self_signed
                           else c.fingerprint)
            for s in run.host.services if s.https is not None}
    return out


def _failed(runs: list[HostRun]) -> bool:
    return any(r.status in ("failed", "unreachable") for r in runs)


# --- the two commands' runs ---------------------------------------------------------------

def plan(job: Run, forks: int, accept_new: bool, as_json: bool, shard_text: str | None,
         detailed_exitcode: bool, gateways: Gateways, early: dict[str, Future[Chain]]) -> None:
    """Probe and diff every selected host; print the plan (or --json); Exit with its status."""
    memory = Memory.now(len(job.selected), forks)
    closing = Closing()
    display = Display(Board(), wanted(as_json))
    runs = _prepare_all(job, forks, accept_new, display, keep_pending=False,
                        gateways=gateways, early=early, closing=closing)
    if as_json:
        _json(runs, "plan", job, shard_text, memory)
    else:
        _print_plan(runs)
        _print_recap(runs, f"plan: {job.pb.name}")
    closing.wait()  # before the bastion hops they ride on are closed
    raise Exit(exit_status(sections(runs), detailed_exitcode))


def apply(job: Run, forks: int, accept_new: bool, as_json: bool, shard_text: str | None,
          yes: bool, confirm_timeout: int | None, lock_timeout: int, gateways: Gateways,
          early: dict[str, Future[Chain]]) -> None:
    """Plan every selected host under its lock, ask (unless `yes`), apply in waves
    (bastions before their hosts), print the recap (or --json); Exit with its status.
    Ctrl-C (`provision.hosts.interrupt`): the first stops starting hosts and waves, lets
    those in flight finish, and ends with the recap and exit 130; the second leaves at once."""
    memory = Memory.now(len(job.selected), forks)
    timeout = confirm_timeout or job.inv.confirm_timeout
    runs: list[HostRun] = []
    closing = Closing()
    display = Display(Board(), wanted(as_json))
    stop = Stop(display.board, display.say, leave=display.leave)
    try:
        with stopping(stop):
            runs = _prepare_all(job, forks, accept_new, display, keep_pending=True,
                                gateways=gateways, early=early, closing=closing,
                                spec=_lock_spec(lock_timeout), stop=stop)
            if stop.requested:  # planned under the lock, but nothing goes out
                runs = [_not_applied(display, r) for r in runs]
            pending = [r for r in runs if r.status == "pending"]
            display.board.reset(r.host.name for r in pending)  # what Ctrl-C counts from now
            if pending and not as_json:
                _print_plan(runs)
            if pending and not yes and not stop.requested:
                with asking():
                    _ask(pending)
            if pending:
                runs = _apply_waves(job, runs, accept_new, timeout, forks, display, stop)
    finally:
        closing.wait()  # the no-op hosts' closes, before the rest (each run closed once at a time)
        for run in runs:
            close(run)
    if as_json:
        _json(runs, "apply", job, shard_text, memory, interrupted=stop.requested)
    else:
        _print_recap(runs, f"apply: {job.pb.name}")
        if not stop.requested:
            echo(apply_line([r.status for r in runs]))
    if stop.requested:
        echo(_interrupted_headline(runs), err=True)
        raise Exit(EXIT_INTERRUPTED)
    certs_failed = False
    converged = [r.host for r in runs if r.status not in ("failed", "unreachable")]
    if any(s.https is not None for h in converged for s in h.services):
        from provision.commands.certs import after_apply  # the ACME library: doors only

        certs_failed = after_apply(job.inv, converged, accept_new, _held(runs))
    raise Exit(EXIT_FAILED if _failed(runs) or certs_failed else EXIT_OK)


def _ask(pending: list[HostRun]) -> None:
    """The question before anything changes; no (or Ctrl-C there) ends the command."""
    try:
        go = click.confirm(f"apply {sum(r.changes for r in pending)} change(s) to "
                           f"{len(pending)} host(s)?", default=False, err=True)
    except click.Abort:  # Ctrl-C (or end of input) at the question
        click.echo("\napply cancelled; nothing changed", err=True)
        raise Exit(EXIT_INTERRUPTED) from None
    if not go:
        click.echo("apply cancelled; nothing changed", err=True)
        raise Exit(EXIT_FAILED)


def _apply_waves(job: Run, runs: list[HostRun], accept_new: bool, timeout: int, forks: int,
                 display: Display, stop: Stop) -> list[HostRun]:
    """Apply the pending runs wave by wave (bastions settle before their hosts); after
    Ctrl-C no host and no wave starts."""
    def guarded(run: HostRun) -> HostRun:
        return execute_guarded(job.inv, run, accept_new, timeout)

    def execute(run: HostRun) -> HostRun:
        return execute_in_order(run, guarded)  # Python tasks first, in order

    not_applied = functools.partial(_not_applied, display)
    done: dict[str, HostRun] = {}
    with display.phase("applying", [r.host.name for r in runs if r.status == "pending"]):
        for wave in waves(runs, lambda run: run.host):
            if stop.requested:  # no new wave: the rest is not started
                break
            applied = in_parallel(_unless_stopped(stop, _told(display, execute), not_applied),
                                  wave, forks)
            done.update((run.host.name, run) for run in applied)
    return [done.get(run.host.name) or not_applied(run) for run in runs]


def _interrupted_headline(runs: Sequence[HostRun]) -> str:
    """The last line after Ctrl-C: what the run did before it stopped, by status."""
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.status] = counts.get(r.status, 0) + 1
    said = ", ".join(f"{n} {status.replace('-', ' ')}" for status, n in counts.items())
    return f"interrupted (Ctrl-C): {said}; run apply again to finish"
