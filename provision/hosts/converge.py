"""Converge hosts in parallel: connect, probe once, diff, then (apply) run one batch.

Shell layer: decisions come from the playbook's steps (pure diffs over facts); this module
only moves data over SSH and records what happened. Each host runs in its own thread with
its own connection chain; an unreachable or failing host never stops the others.
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

# Imported here, in the main thread, before any pool starts: a first import of paramiko
# racing in two threads hits its circular imports half-initialised. (Fabric, which only
# Python tasks need, is imported by `pytasks.load`, in the main thread too.)
import paramiko  # noqa: F401

from provision.facts import Facts, Request
from provision.facts.support import refusal
from provision.facts.system import SPEC as SYSTEM
from provision.inventory.model import Host, Inventory
from provision.playbook import Playbook
from provision.pytasks import load as pytasks
from provision.pytasks.load import TaskFailed
from provision.ssh.connect import Chain, Gateways
from provision.ssh.limits import machine_forks as machine_forks  # where commands find it
from provision.ssh.session import Remote, SudoPassword
from provision.steps import apt_script
from provision.steps import script as batch
from provision.steps.actions import Action
from provision.steps.command import Decision, ShellStep
from provision.steps.commit import CommitConfirmed
from provision.steps.files import cleanup
from provision.steps.python_task import RunTask, TaskStep
from provision.steps.step import Planned, Refused, Step

from . import lock as L
from .gather import HeldLock, probe_locked, probe_peek
from .progress import Event, from_batch_line
from .reach import Unreachable, connecting, reason

LockEvents = Callable[[Host, str, L.Report], None]
Say = Callable[[Event], None]  # where a host's progress goes (`provision.hosts.progress`)

# Every converge also reports these (recap --json: OS, Docker, GPUs, listening sockets).
BASE_REQUEST = Request(facts=("system", "sockets", "gpus"))


@dataclass
class HostRun:
    host: Host
    status: str = "pending"  # ok | changed | failed | unreachable | not-started (Ctrl-C)
    # (pending: planned, not run)
    actions: list[tuple[str, Planned]] = field(default_factory=list)  # (step, action)
    done: int = 0  # actions that completed
    error: str = ""
    note: str = ""  # e.g. "booting, retried 3×: System is booting up..."
    retries: int = 0
    failed_action: str = ""
    unit_failure: batch.UnitFailure | None = None  # a unit that did not start: why
    remote_execs: int = 0
    seconds: float = 0.0
    decisions: list[Decision] = field(default_factory=list)  # run:/task: steps: run or not, why
    facts: Facts | None = None
    chain: Any = None
    remote: Any = None
    gateways: Gateways | None = None  # the run's shared bastion hops (confirmations use them)
    lock: HeldLock | None = None  # apply: the host lock, held until `close`
    lock_report: L.Report | None = None
    say: Say | None = None  # progress events, as they happen

    def tell(self, kind: str, **kw: Any) -> None:
        """Say what this host is doing now (a no-op without a listener)."""
        if self.say is not None:
            self.say(Event(self.host.name, kind, **kw))

    def batch_lines(self, actions: list[Any]) -> Callable[[str], None] | None:
        """`Remote.sh`'s `on_line` for a batch of `actions`: its markers as progress."""
        if self.say is None:
            return None
        say, steps = self.say, [a.describe() for a in actions]

        def on_line(line: str) -> None:
            e = from_batch_line(self.host.name, line, steps)
            if e is not None:
                say(e)
        return on_line

    @property
    def changes(self) -> int:
        return len(self.actions)

    def to_json(self) -> dict[str, Any]:
        f = self.facts
        return {
            "host": self.host.name, "status": self.status, "changes": self.changes,
            "changed": self.done, "error": self.error or None, "note": self.note or None,
            "retries": self.retries,
            "failed_action": self.failed_action or None,
            "unit_failure": None if self.unit_failure is None else self.unit_failure.to_json(),
            "remote_execs": self.remote_execs, "seconds": round(self.seconds, 3),
            "lock": None if self.lock_report is None else self.lock_report.to_json(),
            "actions": [{"step": s, "type": type(a).__name__, "description": a.describe()}
                        for s, a in self.actions],
            "steps": [d.to_json() for d in self.decisions],
            "facts": None if f is None else {
                "os": f.os, "docker": f.docker,
                "gpus": [{"index": g.index, "name": g.name, "uuid": g.uuid, "driver": g.driver,
                          "memory": g.memory, "persistence": g.persistence,
                          "ecc_uncorrected": g.ecc_uncorrected, "bus_id": g.bus_id}
                         for g in f.gpus.devices],
                "gpu_summary": f.gpus.summary or None,
                "listening": [{"address": s.address, "port": s.port, "process": s.process}
                              for s in f.listening],
            },
        }


def prepare(inv: Inventory, host: Host, playbook: Playbook, accept_new: bool,
            gateways: Gateways | None = None, spec: L.Spec | None = None,
            on_event: LockEvents | None = None, opened: Future[Chain] | None = None,
            say: Say | None = None) -> HostRun:
    """Connect (through `gateways`' shared bastion hops, if given; `opened`: a connection
    the caller started already), probe, diff. Never raises: problems land in the result's
    status.

    With `spec` (apply) the probe takes the host lock first (waiting, `on_event` says for
    what) and the run keeps it while it has changes to make (released by `close`); without
    (plan) it only reports who holds the host. `say`: progress events."""
    run = HostRun(host, gateways=gateways, say=say)
    run.tell("connecting")
    started = time.monotonic()
    if opened is None:  # network round trips while the state renders
        opened = connecting(inv, host, accept_new, gateways)
    try:
        steps = playbook.build(inv, host)
        request = BASE_REQUEST
        for s in steps:
            request = request.merge(s.request())
    except Exception as e:  # a render error is this host's failure, not everyone's
        run.status, run.error = "failed", f"cannot build the desired state: {reason(e)}"
        with contextlib.suppress(Exception):
            opened.result().close()
        return run
    try:
        run.chain = opened.result()
    except Unreachable as e:
        run.status, run.error = "unreachable", str(e)
        return run
    if run.chain.retried is not None:
        run.retries, run.note = run.chain.retried.attempts, run.chain.retried.note()
    run.remote = Remote(run.chain)
    run.tell("probing")
    try:
        if spec is None:
            run.facts, run.lock_report = probe_peek(run.remote, request)
        else:
            def said(kind: str, report: L.Report) -> None:
                if on_event is not None:
                    on_event(host, kind, report)

            facts, run.lock_report, run.lock = probe_locked(run.remote, request, spec, said)
            if facts is None:
                run.status = "failed"
                run.error = (L.failure(run.lock_report, spec.timeout, time.time())
                             or "host lock: not taken")
                return run
            run.facts = facts
        run.note = "; ".join(filter(None, [run.note, L.note(run.lock_report, time.time(),
                                                             plan=spec is None)]))
        refused = refusal(run.facts.get(SYSTEM))  # before any step: nothing half-applied
        if refused:
            raise Refused(refused)
        steps = check_tasks(run, steps)
        actions: list[tuple[str, Planned]] = [("cleanup", a) for a in cleanup(run.facts.temps)]
        for s in steps:
            actions += [(s.name, a) for a in s.diff(run.facts)]
            notes = getattr(s, "notes", None)  # a step's warnings (what it could not check)
            if notes is not None:
                add_notes(run, notes(run.facts))
            if isinstance(s, ShellStep | TaskStep):
                run.decisions.append(s.decision(run.facts))
        run.actions = actions
        run.status = "pending" if actions else "ok"
    except (Refused, SudoPassword, TaskFailed) as e:
        run.status, run.error = "failed", str(e)
    except Exception as e:
        run.status, run.error = "failed", f"facts: {reason(e)}"
    finally:
        if run.status != "pending":
            release(run)  # nothing to change: the next run need not wait for us
        run.remote_execs = run.remote.execs
        run.seconds = time.monotonic() - started
    return run


def check_tasks(run: HostRun, steps: list[Step]) -> list[Step]:
    """Call the check of every Python task (on this machine, over the host's connection):
    the steps with their answers. Raises TaskFailed when a check fails."""
    out: list[Step] = []
    for s in steps:
        if isinstance(s, TaskStep) and s.loaded.check is not None:
            got = pytasks.check(s.loaded, pytasks.task_connection(run.chain, run.remote),
                                run.host, s.spec.ref)
            if got.error:
                raise TaskFailed(got.error)
            s = s.checked(got.value)
        out.append(s)
    return out


def execute_in_order(run: HostRun, finish: Callable[[HostRun], HostRun]) -> HostRun:
    """Apply a run whose plan holds Python tasks, in the playbook's order: each stretch of
    plain actions before a task as one batch, then the task (here, over the host's
    connection), and the rest (plain actions after the last task, then the commit-confirmed
    changes, as without tasks) through `finish`. The first failure stops the host."""
    if run.status != "pending" or not any(isinstance(a, RunTask) for _, a in run.actions):
        return finish(run)
    planned = run.actions
    ordered: list[tuple[str, Planned]] = [
        (s, a) for s, a in planned if not isinstance(a, CommitConfirmed)]
    last = max(i for i, (_, a) in enumerate(ordered) if isinstance(a, RunTask))
    rest: list[tuple[str, Planned]] = [
        *ordered[last + 1:], *((s, a) for s, a in planned if isinstance(a, CommitConfirmed))]
    done = 0
    try:
        for segment in _segments(ordered[: last + 1]):
            task = segment[0][1]
            if isinstance(task, RunTask):
                started = time.monotonic()
                run.tell("applying", detail=f"Python task {task.describe()}")
                error = pytasks.run(task, pytasks.task_connection(run.chain, run.remote),
                                    run.host)
                run.seconds += time.monotonic() - started
                run.remote_execs = run.remote.execs
                if error:
                    run.status, run.error, run.failed_action = "failed", error, task.describe()
                    return run
                done += 1
                continue
            run.actions = segment
            execute(run)
            if run.status != "changed":
                done += run.done
                return run
            done += len(segment)
            run.status = "pending"
        run.actions = rest
        if rest:
            finish(run)
            done += run.done
        else:
            run.status = "changed"
        return run
    finally:
        run.actions = planned
        run.done = done


def _segments(actions: list[tuple[str, Planned]]) -> list[list[tuple[str, Planned]]]:
    """Runs of plain actions, and each Python task on its own, in order."""
    out: list[list[tuple[str, Planned]]] = []
    for item in actions:
        if isinstance(item[1], RunTask) or not out or isinstance(out[-1][0][1], RunTask):
            out.append([item])
        else:
            out[-1].append(item)
    return out


def release(run: HostRun) -> None:
    """Give the host lock up (one byte; no round trip waited for)."""
    if run.lock is not None:
        run.lock.release()


def locked_script(run: HostRun, script: str) -> str:
    """`script` made to run only while this run still holds the host lock."""
    return script if run.lock is None else L.guard(run.lock.token, script)


class Contention:
    """Wait-die over one apply's hosts (`lock.must_yield`): while any of its hosts waits for an
    older run, this run holds no other host's lock: those it holds are let go and probed again
    in the next round (`redo`). The older run never waits for a run that waits for it, so two
    runs over the same hosts cannot block each other until their timeouts."""

    def __init__(self, token: str, say: LockEvents | None = None) -> None:
        self.token = token
        self.say = say
        self.mutex = threading.Lock()
        self.waiting: set[str] = set()  # hosts waiting for an older run
        self.held: dict[str, HostRun] = {}  # hosts prepared with changes, lock held
        self.redo: set[str] = set()

    def on_event(self, host: Host, kind: str, report: L.Report) -> None:
        if self.say is not None:
            self.say(host, kind, report)
        if kind != "busy" or not L.must_yield(self.token, report.busy):
            return
        with self.mutex:
            self.waiting.add(host.name)
            victims = list(self.held.values())
            self.held.clear()
            self.redo.update(r.host.name for r in victims)
        for run in victims:
            self._let_go(run)

    def prepared(self, run: HostRun) -> None:
        """A host's prepare returned: keep its lock, or let it go while others wait."""
        with self.mutex:
            self.waiting.discard(run.host.name)
            keep = run.lock is not None and run.status == "pending" and not self.waiting
            if keep:
                self.held[run.host.name] = run
            elif run.lock is not None and run.status == "pending":
                self.redo.add(run.host.name)
        if not keep and run.host.name in self.redo:
            self._let_go(run)

    def take_redo(self) -> set[str]:
        with self.mutex:
            redo, self.redo = self.redo, set()
            for name in redo:
                self.held.pop(name, None)
            return redo

    def _let_go(self, run: HostRun) -> None:
        release(run)
        if self.say is not None and run.lock_report is not None:
            self.say(run.host, "yield", run.lock_report)


def plain_actions(run: HostRun) -> list[Action]:
    """The run's actions that go into the plain batch (not the commit-confirmed ones)."""
    return [a for _, a in run.actions if not isinstance(a, CommitConfirmed | RunTask)]


def execute(run: HostRun) -> HostRun:
    """Run the planned actions as one batch."""
    if run.status != "pending":
        return run
    started = time.monotonic()
    plain = plain_actions(run)
    if len(plain) != len(run.actions):
        raise TypeError("commit-confirmed actions go through provision.hosts.confirm, "
                        "Python tasks through execute_in_order")
    run.tell("applying", steps=len(plain))
    try:
        out = run.remote.sh(locked_script(run, batch.build(plain)),
                            on_line=run.batch_lines(plain))
        last, finished = batch.parse_progress(out.stdout)
        add_notes(run, apt_script.notes(out.stdout))
        if out.status == 0 and finished:
            run.done, run.status = len(run.actions), "changed"
        else:
            batch_failed(run, [a for _, a in run.actions], last, out.status, out.stderr)
    except Exception as e:
        run.status, run.error = "failed", f"apply: {reason(e)}"
    finally:
        run.remote_execs = run.remote.execs
        run.seconds += time.monotonic() - started
    return run


def add_notes(run: HostRun, notes: list[str]) -> None:
    """Lines the batch said on the side (a wait for the dpkg lock) join the recap's note."""
    run.note = "; ".join(x for x in (run.note, *notes) if x)


def batch_failed(run: HostRun, actions: list[Any], last: int, status: int, stderr: str) -> None:
    """Record a batch that stopped at action `last`: which one, and why (a unit's journal)."""
    run.done = max(last, 0)
    run.status = "failed"
    if 0 <= last < len(actions):
        run.failed_action = actions[last].describe()
    run.unit_failure = batch.unit_failure(stderr)
    if run.unit_failure is not None:
        run.error = run.unit_failure.summary()
        return
    said = apt_script.error_line(stderr)  # a step that says in one line what went wrong
    if said is not None:
        run.error = said  # names the step's own subject (a source, the lock, apt's E: line)
        return
    tail = batch.without_markers(stderr).strip().splitlines()[-3:]
    run.error = (f"{run.failed_action or 'batch'} failed (exit {status})"
                 + (": " + " / ".join(tail) if tail else ""))


def close(run: HostRun) -> None:
    release(run)
    if run.chain is not None:
        run.chain.close()
        run.chain = None


@dataclass
class Memory:
    """The control process's memory over a converge: resident set at the start and its peak
    (Linux: /proc/self/statm and getrusage), and the growth per host."""

    start_kib: int
    peak_kib: int = 0
    hosts: int = 0
    forks: int = 0

    @classmethod
    def now(cls, hosts: int, forks: int) -> Memory:
        try:
            pages = int(open("/proc/self/statm").read().split()[1])  # noqa: SIM115
            start = pages * os.sysconf("SC_PAGE_SIZE") // 1024
        except (OSError, ValueError, IndexError):
            start = 0
        return cls(start, hosts=hosts, forks=forks)

    def finish(self) -> Memory:
        self.peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        return self

    def to_json(self) -> dict[str, Any]:
        grown = max(0, self.peak_kib - self.start_kib)
        return {"hosts": self.hosts, "forks": self.forks,
                "rss_start_mib": round(self.start_kib / 1024, 1),
                "rss_peak_mib": round(self.peak_kib / 1024, 1),
                "per_host_in_flight_kib": round(grown / max(1, min(self.hosts, self.forks)))}


def in_parallel(fn: Callable[[Any], HostRun], items: list[Any], forks: int,
                on_done: Callable[[HostRun], None] | None = None) -> list[HostRun]:
    """Run `fn` over `items` in a bounded pool; results in the order of `items`."""
    results: list[HostRun | None] = [None] * len(items)
    with ThreadPoolExecutor(max_workers=max(1, min(forks, len(items) or 1))) as pool:
        futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
        for fut in as_completed(futures):
            r = fut.result()
            results[futures[fut]] = r
            if on_done:
                on_done(r)
    return [r for r in results if r is not None]
