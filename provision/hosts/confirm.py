"""Commit-confirmed execution over SSH (shell layer: decides nothing).

One host run with commit-confirmed actions (sshd, firewall) costs, after the fact probe:

1. one exec over the existing session: the plain actions' batch (users, packages, ...),
   then each commit's apply script (validate on the host, back up, arm the host-side
   rollback timer, install, apply), stopping at the first failure;
2. one exec over a NEW connection through the whole jump chain (`connect()`: the operator's
   key, host keys verified) that confirms every armed commit. Its arrival is the proof that
   the changed sshd and firewall still let the operator in;
3. no confirmation before the timeout: the host rolls back by itself; we read what it did
   (over the old session, which a rollback leaves alone, else a fresh connection) and report
   a failure with the reason.
"""

from __future__ import annotations

import functools
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from provision.inventory.model import Inventory
from provision.ssh.connect import connect
from provision.ssh.session import Remote
from provision.steps import apt_script
from provision.steps import commit as C
from provision.steps import script as batch
from provision.steps.actions import Action
from provision.steps.verify import verify

from .converge import HostRun, add_notes, batch_failed, execute, locked_script, plain_actions
from .reach import reason as _reason

APPLY_TIMEOUT = 300.0  # an apply with only commits; with a batch (apt) there is no limit
RETRY_PAUSE = 0.5
STATUS_GRACE = 15.0
T = TypeVar("T")


def _bounded(fn: Callable[[], T], timeout: float) -> tuple[bool, T | None, BaseException | None]:
    """Run fn() in a daemon thread: (finished, result, error). A connection attempt that
    hangs (its SYN dropped by the new rules) is abandoned, never waited on past `timeout`."""
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(fn())
        except BaseException as e:
            error.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(max(0.0, timeout))
    if t.is_alive():
        return False, None, None
    return True, (result[0] if result else None), (error[0] if error else None)


@dataclass
class Phase:
    """Where one attempt is, for the recap when the deadline cuts it short."""
    what: str = "not started"
    since: float = 0.0

    def enter(self, what: str) -> None:
        self.what, self.since = what, time.monotonic()

    def text(self) -> str:
        return f"{self.what} for {time.monotonic() - self.since:.1f} s"


def _fresh_exec(inv: Inventory, run: HostRun, accept_new: bool, script: str,
                timeout: float, phase: Phase | None = None) -> str:
    """A new login to the host, one exec, closed. The bastion hops are the run's shared ones:
    what a confirmation proves is that a new login to this host works after its change, and
    the bastions settled (and proved their own new logins) in an earlier wave. Under load,
    a fresh bastion login per confirmation made confirmations miss their window."""
    phase = phase or Phase()
    via = [b.name for b in inv.chain(run.host)]
    phase.enter(f"logging in to {run.host.name}" + (f" through {', '.join(via)}" if via else ""))
    chain = connect(inv, run.host, accept_new=accept_new, gateways=run.gateways)
    try:
        phase.enter("running the confirm script")
        return Remote(chain).sh(script, timeout=timeout).stdout
    finally:
        chain.close()


@dataclass
class Confirmation:
    answers: list[bool | None]  # per commit: True confirmed, False host already rolling back
    cause: str = ""
    seconds: float = 0.0


def confirm(inv: Inventory, run: HostRun, accept_new: bool, script: str, n: int,
            deadline: float) -> Confirmation:
    """Fresh connections until one runs the confirm script, or `deadline` (monotonic). The
    cause of a miss names what ate the window: no time left at all, or where the last
    attempt was (logging in through which hops, or running the script) and for how long."""
    t0 = time.monotonic()
    last, attempts = "no attempt", 0
    window = deadline - t0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            head = (f"no time left to try: the window was {max(0.0, window):.1f} s when the "
                    "apply returned" if attempts == 0 else f"{attempts} attempt(s), last: {last}")
            return Confirmation([None] * n, head, time.monotonic() - t0)
        attempts += 1
        phase = Phase()
        done, stdout, err = _bounded(
            functools.partial(_fresh_exec, inv, run, accept_new, script, left, phase), left)
        if not done:
            cut = f"the last one still {phase.text()} at the deadline"
            return Confirmation([None] * n, f"{attempts} attempt(s) in {window:.1f} s, {cut}"
                                + (f"; before it: {last}" if attempts > 1 else ""),
                                time.monotonic() - t0)
        if err is not None:
            last = _reason(err)
            time.sleep(min(RETRY_PAUSE, max(0.0, deadline - time.monotonic())))
            continue
        _, parts = C.split_sections(stdout or "")
        answers = [C.confirmed(p) for p in parts] + [None] * (n - len(parts))
        return Confirmation(answers[:n], "" if all(answers) else "confirm script: no answer",
                            time.monotonic() - t0)


def _status(inv: Inventory, run: HostRun, accept_new: bool, script: str, n: int) -> list[C.Status]:
    def parse(stdout: str) -> list[C.Status]:
        _, parts = C.split_sections(stdout)
        got = [C.parse_status(p) for p in parts]
        return got + [C.Status("unknown")] * (n - len(got))

    done, out, err = _bounded(lambda: run.remote.sh(script, timeout=STATUS_GRACE * n + 10),
                              STATUS_GRACE * n + 12)
    if done and err is None and out is not None and out.status == 0:
        return parse(out.stdout)
    done, stdout, err = _bounded(
        lambda: _fresh_exec(inv, run, accept_new, script, STATUS_GRACE * n + 10),
        STATUS_GRACE * n + 25)
    if done and err is None:
        return parse(stdout or "")
    return [C.Status("unknown")] * n


def _tail(stderr: str) -> str:
    return " / ".join(stderr.strip().splitlines()[-3:])


def execute_guarded(inv: Inventory, run: HostRun, accept_new: bool, timeout: int) -> HostRun:
    """`execute` for runs with commit-confirmed actions (falls back to it without them)."""
    if run.status != "pending":
        return run
    guarded: list[C.CommitConfirmed] = [
        a for _, a in run.actions if isinstance(a, C.CommitConfirmed)]
    if not guarded:
        return execute(run)
    plain = plain_actions(run)
    ids = [f"{a.kind}-{secrets.token_hex(4)}" for a in guarded]
    started = time.monotonic()
    fresh = [0]  # execs over new connections (the confirmation), counted with the session's
    try:
        _run(inv, run, accept_new, timeout, plain, guarded, ids, fresh)
    except Exception as e:
        run.status = "failed"
        run.error = (f"apply: {_reason(e)}; a firewall/sshd change armed before this rolls back "
                     "on the host by itself")
    finally:
        run.remote_execs = run.remote.execs + fresh[0]
        run.seconds += time.monotonic() - started
    return run


def _verified(inv: Inventory, run: HostRun, accept_new: bool, guarded: list[C.CommitConfirmed],
              ids: list[str], results: list[C.ApplyResult], armed: list[int],
              problems: list[str]) -> list[int]:
    """The armed commits whose effect the host's read-back confirms; the others are rolled
    back now (not at the timer), each with its cause added to `problems`."""
    bad = [(k, why) for k in armed
           if (why := verify(guarded[k], results[k], run.facts)) is not None]
    if not bad:
        return armed
    script = C.combined([C.rollback_now_script(guarded[k], ids[k]) for k, _ in bad],
                        stop_on_error=False, what="rollback now")
    statuses = _status(inv, run, accept_new, script, len(bad))
    for (k, why), st in zip(bad, statuses, strict=True):
        done = ("rolled back at once" if st.result == "rolled-back" else
                f"the host rolls it back by its timer (status: {st.result or 'unknown'})")
        problems.append(f"{guarded[k].kind}: {why}; {done}")
    if not run.failed_action:
        run.failed_action = guarded[bad[0][0]].describe()
    failed = {k for k, _ in bad}
    return [k for k in armed if k not in failed]


def _run(inv: Inventory, run: HostRun, accept_new: bool, timeout: int, plain: list[Action],
         guarded: list[C.CommitConfirmed], ids: list[str], fresh: list[int]) -> None:
    script = C.combined([C.apply_script(a, i, timeout, tuple(ids[:k]))
                         for k, (a, i) in enumerate(zip(guarded, ids, strict=True))],
                        batch=batch.build(plain) if plain else None,
                        stop_on_error=True, what="apply")
    run.tell("applying", steps=len(plain), armed=True,
             detail=", ".join(a.kind for a in guarded) + " (commit-confirmed)")
    out = run.remote.sh(locked_script(run, script), timeout=None if plain else APPLY_TIMEOUT,
                        on_line=run.batch_lines(plain))
    returned = time.monotonic()
    head, sections = C.split_sections(out.stdout)
    run.done = 0
    if plain:
        last, finished = batch.parse_progress(head)
        add_notes(run, apt_script.notes(head))  # e.g. how long it waited for the dpkg lock
        if not finished:
            batch_failed(run, plain, last, out.status, out.stderr)
            return
        run.done = len(plain)
    results = [C.parse_apply(s) for s in sections]
    armed = [k for k, r in enumerate(results) if r.armed and r.applied and not r.failed]
    problems: list[str] = []
    for k, a in enumerate(guarded):
        r = results[k] if k < len(results) else None
        if r is None:
            if not problems:
                problems.append(f"{a.kind}: not applied (the run stopped before it, exit "
                                f"{out.status}{': ' + _tail(out.stderr) if out.stderr.strip() else ''})")
            break
        if r.invalid:
            problems.append(f"{a.kind}: rejected on the host, nothing changed: {r.message}")
        elif not r.armed:
            problems.append(f"{a.kind}: could not arm the rollback, nothing changed (exit "
                            f"{out.status}): {r.message or _tail(out.stderr)}")
        elif r.failed or not r.applied:
            problems.append(f"{a.kind}: apply failed, previous state restored at once: "
                            f"{r.message or _tail(out.stderr)}")
        if problems:
            run.failed_action = a.describe()
            break
    armed = _verified(inv, run, accept_new, guarded, ids, results, armed, problems)
    if armed:
        confirm_script = C.combined([C.confirm_script(guarded[k], ids[k]) for k in armed],
                                    stop_on_error=False, what="confirm")
        window = C.confirm_window(timeout, results)
        run.tell("confirming", until=returned + window)
        conf = confirm(inv, run, accept_new, confirm_script, len(armed), returned + window)
        fresh[0] += 1
        missed = [k for k, ok in zip(armed, conf.answers, strict=True) if not ok]
        run.done += len(armed) - len(missed)
        if missed:
            status_script = C.combined([C.status_script(guarded[k], ids[k], STATUS_GRACE)
                                        for k in missed], stop_on_error=False, what="status")
            statuses = _status(inv, run, accept_new, status_script, len(missed))
            outcomes = [(k, *C.missed_outcome(guarded[k].kind, timeout, st, conf.cause))
                        for k, st in zip(missed, statuses, strict=True)]
            kept = [text for _, ok, text in outcomes if ok]
            rolled = [(k, text) for k, ok, text in outcomes if not ok]
            run.done += len(kept)
            if kept:
                run.note = "; ".join(filter(None, [run.note, *kept]))
            problems = [text for _, text in rolled] + problems
            if rolled:
                run.failed_action = guarded[rolled[0][0]].describe()
    if problems:
        run.status, run.error = "failed", "; ".join(problems)
    else:
        run.status = "changed"
