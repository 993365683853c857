"""Commit-confirmed execution over SSH (shell layer: decides nothing).

For each `CommitConfirmed` action of a host run: send the apply script over the existing
session (validate, back up, arm the host-side rollback timer, install, apply), then open a
NEW connection through the whole jump chain (`connect()`, the operator's key, host keys
verified) and send the confirm script over it. No confirmation before the timeout: the host
rolls back by itself; we read its status (over the old session, which the rollback leaves
alone) and report a failure with the reason.

Other actions of the same run go first, in one batch, through `provision.hosts.converge.execute`.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from provision.inventory.model import Inventory
from provision.tasks import commit as C

from .converge import HostRun, _reason, execute

# Tests only: seconds to sleep after the change is applied and before confirming (to cut
# the operator side off in the middle of a commit-confirmed apply).
SLEEP_ENV = "PROVISION_TEST_SLEEP_BEFORE_CONFIRM"
APPLY_TIMEOUT = 120.0
RETRY_PAUSE = 0.5
STATUS_GRACE = 15.0


@dataclass
class Outcome:
    ok: bool
    error: str = ""
    rolled_back: bool = False
    rollback_seconds: float | None = None
    confirm_seconds: float | None = None


def _bounded(fn: Any, timeout: float) -> tuple[bool, Any, BaseException | None]:
    """Run fn() in a daemon thread; (finished, result, error). A connection attempt that
    hangs (SYN dropped by the new rules) is abandoned, never waited on past `timeout`."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(max(0.0, timeout))
    if t.is_alive():
        return False, None, None
    return True, box.get("result"), box.get("error")


def _confirm_once(inv: Inventory, run: HostRun, accept_new: bool, script: str,
                  timeout: float) -> str:
    from .connect import connect
    from .session import Remote

    chain = connect(inv, run.host, accept_new=accept_new)
    try:
        out = Remote(chain).sh(script, timeout=timeout)
        return out.stdout
    finally:
        chain.close()


def confirm(inv: Inventory, run: HostRun, accept_new: bool, action: C.CommitConfirmed,
            commit_id: str, deadline: float) -> tuple[bool | None, str]:
    """Try fresh connections until one confirms or `deadline` (monotonic) passes.
    (True, "") confirmed; (False, why) the host was already rolling back; (None, why) no
    new connection got through in time."""
    script = C.confirm_script(action, commit_id)
    last = "no attempt"
    attempts = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None, f"{attempts} attempt(s), last: {last}"
        attempts += 1
        done, stdout, err = _bounded(
            lambda left=left: _confirm_once(inv, run, accept_new, script, left), left)
        if not done:
            return None, f"{attempts} attempt(s), last: new connection still not through"
        if err is not None:
            last = _reason(err)
            time.sleep(min(RETRY_PAUSE, max(0.0, deadline - time.monotonic())))
            continue
        answer = C.confirmed(stdout or "")
        if answer is True:
            return True, ""
        if answer is False:
            return False, "the host was already rolling back"
        last = "no answer from the confirm script"


def _status(inv: Inventory, run: HostRun, accept_new: bool, action: C.CommitConfirmed,
            commit_id: str) -> C.Status:
    script = C.status_script(action, commit_id, wait=STATUS_GRACE)
    done, out, err = _bounded(lambda: run.remote.sh(script, timeout=STATUS_GRACE + 10),
                              STATUS_GRACE + 12)
    if done and err is None and out is not None and out.status == 0:
        return C.parse_status(out.stdout)
    done, stdout, err = _bounded(
        lambda: _confirm_once(inv, run, accept_new, script, STATUS_GRACE + 10), STATUS_GRACE + 25)
    if done and err is None:
        return C.parse_status(stdout or "")
    return C.Status("unknown")


def run_commit(inv: Inventory, run: HostRun, action: C.CommitConfirmed, accept_new: bool,
               timeout: int) -> Outcome:
    commit_id = f"{action.kind}-{secrets.token_hex(4)}"
    started = time.monotonic()
    out = run.remote.sh(C.apply_script(action, commit_id, timeout), timeout=APPLY_TIMEOUT)
    res = C.parse_apply(out.stdout)
    if res.invalid:
        return Outcome(False, f"{action.kind}: rejected on the host, nothing changed: {res.message}")
    if not res.armed:
        tail = " / ".join(out.stderr.strip().splitlines()[-3:])
        return Outcome(False, f"{action.kind}: could not arm the rollback, nothing changed "
                              f"(exit {out.status}){': ' + tail if tail else ''}")
    if res.failed or not res.applied:
        tail = res.message or " / ".join(out.stderr.strip().splitlines()[-3:])
        return Outcome(False, f"{action.kind}: apply failed, previous state restored at once: "
                              f"{tail}", rolled_back=True)
    pause = float(os.environ.get(SLEEP_ENV, "0") or 0)
    if pause:
        time.sleep(pause)
    t_confirm = time.monotonic()
    ok, cause = confirm(inv, run, accept_new, action, commit_id, started + timeout)
    if ok:
        return Outcome(True, confirm_seconds=time.monotonic() - t_confirm)
    status = _status(inv, run, accept_new, action, commit_id)
    return Outcome(False, C.rollback_reason(action.kind, timeout, status, cause),
                   rolled_back=status.result == "rolled-back",
                   rollback_seconds=status.rollback_seconds)


def execute_guarded(inv: Inventory, run: HostRun, accept_new: bool, timeout: int) -> HostRun:
    """`execute` for runs whose actions include commit-confirmed ones: the plain actions in
    one batch first, then each commit-confirmed change in playbook order; the first failure
    stops the host."""
    if run.status != "pending":
        return run
    guarded = [(i, a) for i, (_, a) in enumerate(run.actions) if isinstance(a, C.CommitConfirmed)]
    if not guarded:
        return execute(run)
    plain = [(s, a) for s, a in run.actions if not isinstance(a, C.CommitConfirmed)]
    done = 0
    if plain:
        sub = execute(replace(run, actions=plain))
        run.remote_execs, run.seconds = sub.remote_execs, sub.seconds
        if sub.status != "changed":
            run.status, run.error, run.failed_action = sub.status, sub.error, sub.failed_action
            run.done = sub.done
            return run
        done = len(plain)
    started = time.monotonic()
    try:
        for _, action in guarded:
            outcome = run_commit(inv, run, action, accept_new, timeout)
            if not outcome.ok:
                run.status, run.error = "failed", outcome.error
                run.failed_action = action.describe()
                run.done = done
                return run
            done += 1
        run.status, run.done = "changed", done
    except Exception as e:
        run.status, run.error, run.done = "failed", f"apply: {_reason(e)}", done
    finally:
        run.remote_execs = run.remote.execs
        run.seconds += time.monotonic() - started
    return run
