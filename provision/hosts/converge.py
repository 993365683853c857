"""Converge hosts in parallel: connect, probe once, diff, then (apply) run one batch.

Shell layer: decisions come from the playbook's steps (pure diffs over facts); this module
only moves data over SSH and records what happened. Each host runs in its own thread with
its own connection chain; an unreachable or failing host never stops the others.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

# Imported here, in the main thread, before any pool starts: a first import of paramiko
# racing in two threads hits its circular imports half-initialised.
import fabric  # noqa: F401
import paramiko  # noqa: F401

from provision.inventory.model import Host, Inventory
from provision.playbook import Playbook
from provision.tasks.actions import Action
from provision.tasks.files import cleanup

from . import script as batch
from .facts import Facts, FactsError, Request, parse, probe_script

PROBE_TIMEOUT = 120.0
# Connections are opened here while the host's own thread renders; each host still gets
# its own chain, used by one thread at a time (fabric #2262 is about sharing a gateway).
_connector = ThreadPoolExecutor(max_workers=64, thread_name_prefix="connect")
PAUSE_ENV = "PROVISION_TEST_PAUSE_AFTER_TEMP"  # tests only: sleep after writing a temp file


@dataclass
class HostRun:
    host: Host
    status: str = "pending"  # ok | changed | failed | unreachable (pending: planned, not run)
    actions: list[tuple[str, Action]] = field(default_factory=list)  # (step, action)
    done: int = 0  # actions that completed
    error: str = ""
    failed_action: str = ""
    remote_execs: int = 0
    seconds: float = 0.0
    facts: Facts | None = None
    chain: Any = None
    remote: Any = None

    @property
    def changes(self) -> int:
        return len(self.actions)

    def to_json(self) -> dict[str, Any]:
        f = self.facts
        return {
            "host": self.host.name, "status": self.status, "changes": self.changes,
            "changed": self.done, "error": self.error or None,
            "failed_action": self.failed_action or None,
            "remote_execs": self.remote_execs, "seconds": round(self.seconds, 3),
            "actions": [{"step": s, "type": type(a).__name__, "description": a.describe()}
                        for s, a in self.actions],
            "facts": None if f is None else {
                "os": f.os, "docker": f.docker,
                "gpus": [{"name": g.name, "driver": g.driver, "memory": g.memory} for g in f.gpus],
                "listening": [{"address": s.address, "port": s.port, "process": s.process}
                              for s in f.listening],
            },
        }


def _reason(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0] if "\n" in text else text


def prepare(inv: Inventory, host: Host, playbook: Playbook, accept_new: bool) -> HostRun:
    """Connect, probe, diff. Never raises: problems land in the result's status."""
    from .connect import HostKeyError, connect
    from .session import Remote

    run = HostRun(host)
    started = time.monotonic()
    # Open the connection (network round trips) while the desired state renders (CPU).
    opened: Future[Any] = _connector.submit(connect, inv, host, accept_new)
    try:
        steps = playbook.build(inv, host)
        request = Request()
        for s in steps:
            request = request.merge(s.request())
    except Exception as e:  # a render error is this host's failure, not everyone's
        run.status, run.error = "failed", f"cannot build the desired state: {_reason(e)}"
        with contextlib.suppress(Exception):
            opened.result().close()
        return run
    from paramiko.ssh_exception import BadHostKeyException

    try:
        run.chain = opened.result()
    except BadHostKeyException as e:
        run.status = "unreachable"
        run.error = (f"host key for {e.hostname} CHANGED (got {e.key.get_name()}); refusing, even "
                     "with --accept-new. If the change is expected, remove the old entry "
                     "(ssh-keygen -R) and accept the new key")
        return run
    except HostKeyError as e:
        run.status, run.error = "unreachable", str(e)
        return run
    except Exception as e:
        run.status, run.error = "unreachable", f"cannot connect: {_reason(e)}"
        return run
    run.remote = Remote(run.chain)
    try:
        out = run.remote.sh(probe_script(), request.args(), timeout=PROBE_TIMEOUT)
        if out.status != 0:
            raise FactsError(f"probe exited {out.status}: {out.stderr.strip()[-500:]}")
        run.facts = parse(out.stdout)
        actions: list[tuple[str, Action]] = [("cleanup", a) for a in cleanup(run.facts.temps)]
        for s in steps:
            actions += [(s.name, a) for a in s.diff(run.facts)]
        run.actions = actions
        run.status = "pending" if actions else "ok"
    except Exception as e:
        run.status, run.error = "failed", f"facts: {_reason(e)}"
    finally:
        run.remote_execs = run.remote.execs
        run.seconds = time.monotonic() - started
    return run


def execute(run: HostRun) -> HostRun:
    """Run the planned actions as one batch."""
    if run.status != "pending":
        return run
    started = time.monotonic()
    try:
        pause = float(os.environ.get(PAUSE_ENV, "0") or 0)
        out = run.remote.sh(batch.build([a for _, a in run.actions], pause=pause))
        last, finished = batch.parse_progress(out.stdout)
        if out.status == 0 and finished:
            run.done, run.status = len(run.actions), "changed"
        else:
            run.done = max(last, 0)
            run.status = "failed"
            if 0 <= last < len(run.actions):
                run.failed_action = run.actions[last][1].describe()
            tail = out.stderr.strip().splitlines()[-3:]
            run.error = (f"{run.failed_action or 'batch'} failed (exit {out.status})"
                         + (": " + " / ".join(tail) if tail else ""))
    except Exception as e:
        run.status, run.error = "failed", f"apply: {_reason(e)}"
    finally:
        run.remote_execs = run.remote.execs
        run.seconds += time.monotonic() - started
    return run


def close(run: HostRun) -> None:
    if run.chain is not None:
        run.chain.close()
        run.chain = None


def in_parallel(fn: Callable[[Any], HostRun], items: list[Any], forks: int,
                on_done: Callable[[HostRun], None] | None = None) -> list[HostRun]:
    """Run `fn` over `items` in a bounded pool; results in the order of `items`."""
    results: list[HostRun | None] = [None] * len(items)
    with ThreadPoolExecutor(max_workers=max(1, min(forks, len(items) or 1))) as pool:
        futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
        from concurrent.futures import as_completed
        for fut in as_completed(futures):
            r = fut.result()
            results[futures[fut]] = r
            if on_done:
                on_done(r)
    return [r for r in results if r is not None]
