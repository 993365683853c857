"""The converge's phases once the hosts are connecting (`provision.hosts.run` selects the
hosts and starts that): probe and diff every host (under its lock for `apply`), ask,
apply in waves, renew the doors' certificates that may be due. What happens is told to
the command's `Hooks` (the progress board, lines, the plan, the question, the recap);
nothing here prints.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import getpass
import secrets
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from provision.facts import door as DOOR
from provision.inventory.model import Host
from provision.playbook import waves
from provision.ssh.connect import Chain, Gateways

from .confirm import execute_guarded
from .converge import Contention, HostRun, Memory, close, execute_in_order, in_parallel, prepare
from .interrupt import Stop, asking, stopping
from .lock import Report, Spec, event_text, new_token, operator_id
from .progress import NOT_STARTED, Board, Event
from .reach import Closing

if TYPE_CHECKING:
    from .run_job import ApplyOptions, Run

T = TypeVar("T")


class Screen(Protocol):
    """Where a run's progress goes: the board it feeds, lines said above it, a phase drawn
    while it runs, and the way out at once (the second Ctrl-C)."""

    board: Board

    def say(self, line: str) -> None: ...

    def phase(self, title: str, hosts: Iterable[str]) -> AbstractContextManager[None]: ...

    def leave(self, code: int) -> object: ...


@dataclass
class Outcome:
    """What a plan or apply did: each host's run, the control process's memory, whether
    Ctrl-C stopped it, whether a door's certificate failed after it."""

    job: Run
    runs: list[HostRun]
    memory: Memory
    interrupted: bool = False
    certs_failed: bool = False

    @property
    def failed(self) -> bool:
        return any(r.status in ("failed", "unreachable") for r in self.runs)


def _nothing(_: object) -> None:
    return None


@dataclass
class Hooks:
    """What the command gives the run: its `screen`; `show_plan` (apply: the plan, before
    the question), `ask` (the question: raises to end the command; None: `--yes`),
    `report` (the recap, once the hosts' connections are closed) and `log` (the
    certificates' lines)."""

    screen: Screen
    report: Callable[[Outcome], None]
    show_plan: Callable[[list[HostRun]], None] = _nothing
    ask: Callable[[list[HostRun]], None] | None = None
    log: Callable[[str], None] = _nothing


def _unless_stopped(stop: Stop | None, fn: Callable[[T], HostRun],
                    skipped: Callable[[T], HostRun]) -> Callable[[T], HostRun]:
    """`fn`, or `skipped` for a host whose turn comes after the user asked to stop."""
    def go(item: T) -> HostRun:
        return skipped(item) if stop is not None and stop.requested else fn(item)
    return go


def _not_probed(screen: Screen, host: Host) -> HostRun:
    screen.board.feed(Event(host.name, "not-started"))
    return HostRun(host, status=NOT_STARTED,
                   note="stopped (Ctrl-C) before this host was probed: nothing read or changed")


def _not_applied(screen: Screen, run: HostRun) -> HostRun:
    screen.board.feed(Event(run.host.name, "not-started"))
    if run.status == "pending":
        run.status = NOT_STARTED
        run.note = "; ".join(filter(None, [run.note, f"stopped (Ctrl-C) before this host "
                                           f"started: {run.changes} change(s) not applied"]))
    return run


def _told(screen: Screen, fn: Callable[[T], HostRun]) -> Callable[[T], HostRun]:
    """`fn`, then the board told the host is done (with its status)."""
    def go(item: T) -> HostRun:
        run = fn(item)
        screen.board.feed(Event(run.host.name, "done", status=run.status))
        return run
    return go


def prepare_all(job: Run, forks: int, accept_new: bool, screen: Screen, keep_pending: bool,
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
    `spec` (apply) each probe takes the host lock; what it waits for is said as it happens."""
    inv, pb, selected = job.inv, job.pb, job.selected
    def say_lock_event(host: Host, kind: str, report: Report) -> None:
        text = event_text(report, kind, time.time())
        if text:
            screen.say(f"{host.name}: {text}")
            if kind in ("busy", "execs", "armed"):
                screen.board.feed(Event(host.name, "lock-wait", detail=text))

    contention = None if spec is None else Contention(spec.token, say_lock_event)
    started = time.monotonic()

    def one(round_spec: Spec | None, h: Host) -> HostRun:
        run = prepare(inv, h, pb, accept_new, gateways, round_spec,
                      None if contention is None else contention.on_event,
                      opened=early.pop(h.name, None), say=screen.board.feed)
        if contention is not None:
            contention.prepared(run)
        if keep_pending and run.status == "pending":
            return run
        closing.close(functools.partial(close, run), background=len(todo) <= forks)
        return run

    todo, done = list(selected), dict[str, HostRun]()
    round_spec = spec
    while todo:
        with screen.phase("gathering facts", [h.name for h in todo]):
            work = _told(screen, functools.partial(one, round_spec))
            runs = in_parallel(_unless_stopped(stop, work, functools.partial(_not_probed, screen)),
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


def lock_spec(timeout: int) -> Spec:
    """Who this run is, for the host lock: `$USER@hostname` of this machine, the command."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name in the environment or the passwd database
        user = "unknown"
    return Spec(operator_id(user, socket.gethostname()), "apply",
                new_token(time.time(), secrets.token_hex(6)), timeout)


def held(runs: Sequence[HostRun]) -> dict[str, dict[str, str | None]]:
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


# --- the two runs --------------------------------------------------------------------------

def plan(job: Run, forks: int, accept_new: bool, gateways: Gateways,
         early: dict[str, Future[Chain]], hooks: Hooks) -> Outcome:
    """Probe and diff every selected host; `hooks.report` is told the outcome."""
    memory = Memory.now(len(job.selected), forks)
    closing = Closing()
    runs = prepare_all(job, forks, accept_new, hooks.screen, keep_pending=False,
                       gateways=gateways, early=early, closing=closing)
    out = Outcome(job, runs, memory)
    hooks.report(out)
    closing.wait()  # before the bastion hops they ride on are closed
    return out


def apply(job: Run, forks: int, accept_new: bool, options: ApplyOptions, gateways: Gateways,
          early: dict[str, Future[Chain]], hooks: Hooks) -> Outcome:
    """Plan every selected host under its lock, ask (unless `hooks.ask` is None), apply in
    waves (bastions before their hosts), report; then renew the converged doors'
    certificates that may be due. Ctrl-C (`provision.hosts.interrupt`): the first stops
    starting hosts and waves, lets those in flight finish, and the outcome says
    `interrupted` (no certificates then); the second leaves at once."""
    screen = hooks.screen
    memory = Memory.now(len(job.selected), forks)
    timeout = options.confirm_timeout or job.inv.confirm_timeout
    runs: list[HostRun] = []
    closing = Closing()
    stop = Stop(screen.board, screen.say, leave=screen.leave)
    try:
        with stopping(stop):
            runs = prepare_all(job, forks, accept_new, screen, keep_pending=True,
                               gateways=gateways, early=early, closing=closing,
                               spec=lock_spec(options.lock_timeout), stop=stop)
            if stop.requested:  # planned under the lock, but nothing goes out
                runs = [_not_applied(screen, r) for r in runs]
            pending = [r for r in runs if r.status == "pending"]
            screen.board.reset(r.host.name for r in pending)  # what Ctrl-C counts from now
            if pending:
                hooks.show_plan(runs)
            if pending and hooks.ask is not None and not stop.requested:
                with asking():
                    hooks.ask(pending)
            if pending:
                runs = _apply_waves(job, runs, accept_new, timeout, forks, screen, stop)
    finally:
        closing.wait()  # the no-op hosts' closes, before the rest (each run closed once at a time)
        for run in runs:
            close(run)
    out = Outcome(job, runs, memory, interrupted=stop.requested)
    hooks.report(out)
    if out.interrupted:
        return out
    converged = [r.host for r in runs if r.status not in ("failed", "unreachable")]
    if any(s.https is not None for h in converged for s in h.services):
        from provision.acme import renew  # the ACME library: doors only

        due = renew.maybe_due([h for h, _ in renew.doors(job.inv, converged)],
                              dt.datetime.now(dt.UTC), held(runs))
        if due:
            outcomes = renew.renew(job.inv, due, accept_new=accept_new,
                                   log=lambda line: hooks.log(f"  {line}"))
            for o in outcomes:
                hooks.log(f"certs: {o.host} {o.name}: {o.status}: {o.reason}")
            out.certs_failed = any(o.status == "failed" for o in outcomes)
    return out


def _apply_waves(job: Run, runs: list[HostRun], accept_new: bool, timeout: int, forks: int,
                 screen: Screen, stop: Stop) -> list[HostRun]:
    """Apply the pending runs wave by wave (bastions settle before their hosts); after
    Ctrl-C no host and no wave starts."""
    def guarded(run: HostRun) -> HostRun:
        return execute_guarded(job.inv, run, accept_new, timeout)

    def execute(run: HostRun) -> HostRun:
        return execute_in_order(run, guarded)  # Python tasks first, in order

    not_applied = functools.partial(_not_applied, screen)
    done: dict[str, HostRun] = {}
    with screen.phase("applying", [r.host.name for r in runs if r.status == "pending"]):
        for wave in waves(runs, lambda run: run.host):
            if stop.requested:  # no new wave: the rest is not started
                break
            applied = in_parallel(_unless_stopped(stop, _told(screen, execute), not_applied),
                                  wave, forks)
            done.update((run.host.name, run) for run in applied)
    return [done.get(run.host.name) or not_applied(run) for run in runs]
