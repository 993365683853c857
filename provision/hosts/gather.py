"""Gather facts from a host (I/O): connect through its jump chain, run the one probe, parse.

No playbook needed: `converge` asks for what its steps need, `audit` for what it reports.
Decides nothing: the request comes from the caller, the parse from `provision.facts`.
"""

from __future__ import annotations

import contextlib
import select
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

# paramiko's first import is not thread-safe (circular imports): done here, before any pool
import paramiko

from provision.errors import OperationError
from provision.facts import Facts, FactsError, Request, parse, probe_script
from provision.inventory.model import Host, Inventory
from provision.ssh.connect import Chain, Gateways
from provision.ssh.session import Remote, RemoteTimeout

from . import lock
from .reach import in_background as in_background  # where provision.commands.audit finds it
from .reach import open_chain, reason

PROBE_TIMEOUT = 120.0
EXIT_STATUS_WAIT = 10.0  # seconds for an ended exec's exit status to arrive after its EOF
T = TypeVar("T")


def _probe_failed(remote: Remote, status: int, stderr: str) -> OperationError:
    return remote.refused(status, stderr) or FactsError(f"probe exited {status}: {stderr.strip()[-500:]}")


def probe(remote: Remote, request: Request) -> Facts:
    """One remote exec: the probe for `request`. Raises FactsError."""
    out = remote.sh(probe_script(request), request.args(), timeout=PROBE_TIMEOUT)
    if out.status != 0:
        raise _probe_failed(remote, out.status, out.stderr)
    return parse(out.stdout)


def probe_peek(remote: Remote, request: Request) -> tuple[Facts, lock.Report]:
    """`probe` for plan: the same one exec, which also says (never waiting) whether an apply
    holds the host and which rollbacks are armed there."""
    out = remote.sh(lock.script(probe_script(request), None), request.args(),
                    timeout=PROBE_TIMEOUT)
    if out.status != 0:
        raise _probe_failed(remote, out.status, out.stderr)
    lines, answer = lock.split(out.stdout)
    return parse(answer), lock.parse(lines)


class _Beats:
    """One daemon thread for the whole process: a heartbeat byte to every held lock every
    `lock.BEAT` s (the host gives the lock up after `lock.LIFELINE` s of silence)."""

    def __init__(self) -> None:
        self.channels: set[paramiko.Channel] = set()
        self.mutex = threading.Lock()
        self.thread: threading.Thread | None = None

    def add(self, ch: paramiko.Channel) -> None:
        with self.mutex:
            self.channels.add(ch)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, daemon=True, name="lock-beats")
                self.thread.start()

    def discard(self, ch: paramiko.Channel) -> None:
        with self.mutex:
            self.channels.discard(ch)

    def _run(self) -> None:
        while True:
            time.sleep(lock.BEAT)
            with self.mutex:  # held while sending: after `discard` no beat follows a `q`
                for ch in list(self.channels):
                    with contextlib.suppress(Exception):
                        ch.send(b".")


_BEATS = _Beats()


class HeldLock:
    """The exec that holds a host's lock (apply), kept alive by the heartbeat. `release`:
    one byte, no round trip waited for; closing the connection without it ends the lock too
    (the host then marks the record: its session ended without releasing)."""

    def __init__(self, channel: paramiko.Channel, token: str) -> None:
        self.channel = channel
        self.token = token
        self.released = False
        with contextlib.suppress(Exception):
            channel.settimeout(lock.BEAT)  # a beat or the release never blocks for long
        _BEATS.add(channel)

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        _BEATS.discard(self.channel)
        with contextlib.suppress(Exception):
            self.channel.send(b"q")
            self.channel.shutdown_write()
        with contextlib.suppress(Exception):
            self.channel.close()


def probe_locked(remote: Remote, request: Request, spec: lock.Spec,
                 on_event: Callable[[str, lock.Report], None] | None = None
                 ) -> tuple[Facts | None, lock.Report, HeldLock | None]:
    """The one probe exec of an apply, inside the host lock: waits (saying so through
    `on_event`) for the lock, an earlier holder's commands and armed rollbacks, then probes,
    and stays as the lock's holder. (None, report, None) when the lock was not taken (the
    report says why); raises FactsError when the probe itself failed."""
    ch = remote.start(lock.script(probe_script(request), spec), request.args())
    report = lock.Report()
    held = False
    try:
        err: list[bytes] = []
        answer = _read_locked(ch, report, on_event, spec.timeout + PROBE_TIMEOUT, err)
        if answer is None:
            if report.timeout or report.error:
                return None, report, None
            status = exit_status(ch)
            text = b"".join(err + _drain_stderr(ch)).decode("utf-8", "replace")
            raise _probe_failed(remote, status, text)
        facts = parse(answer)
        held = True
        return facts, report, HeldLock(ch, spec.token)
    finally:
        if not held:
            ch.close()


def exit_status(ch: paramiko.Channel, timeout: float = EXIT_STATUS_WAIT) -> int:
    """The exit status of an exec whose output has ended; -1 when none came. OpenSSH sends
    the output's EOF before the exit status, so it can still be on its way: waited for (it
    or the channel's close), not read at once (read at once, `sudo -n`'s refusal sometimes
    showed as "probe exited -1" instead of "sudo needs a password")."""
    ch.status_event.wait(timeout)
    return ch.exit_status if ch.status_event.is_set() else -1


def _drain_stderr(ch: paramiko.Channel) -> list[bytes]:
    out: list[bytes] = []
    while ch.recv_stderr_ready():
        out.append(ch.recv_stderr(65536))
    return out


def _read_locked(ch: paramiko.Channel, report: lock.Report, on_event: Callable[[str, lock.Report], None] | None,
                 timeout: float, err: list[bytes]) -> str | None:
    """Read the held probe's stdout line by line: lock lines go to `report` (and `on_event`)
    as they arrive; returns the probe's answer once its `end` record is in, None when the
    exec ended first."""
    deadline = time.monotonic() + timeout
    buf = b""
    answer: list[str] = []
    while True:
        ready, _, _ = select.select([ch], [], [], max(0.0, deadline - time.monotonic()))
        if not ready and time.monotonic() >= deadline:
            raise RemoteTimeout(f"no answer within {timeout:g}s")
        while ch.recv_ready():
            buf += ch.recv(65536)
        err += _drain_stderr(ch)
        *lines, buf = buf.split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            if not answer and line.startswith("lock\t"):
                kind = lock.feed(report, line)
                if kind is not None and on_event is not None:
                    on_event(kind, report)
                continue
            answer.append(line)
            if line.partition("\t")[0] == "end":
                return "\n".join(answer) + "\n"
        if ch.closed or (ch.eof_received and not ch.recv_ready()):
            return None


@dataclass
class Gathered:
    chain: Chain
    remote: Remote
    facts: Facts

    def close(self) -> None:
        self.chain.close()


def gather(inv: Inventory, host: Host, request: Request, accept_new: bool = False,
           gateways: Gateways | None = None) -> Gathered:
    """Connect and probe. Raises Unreachable or FactsError (the chain is closed then)."""
    chain = open_chain(inv, host, accept_new, gateways=gateways)
    remote = Remote(chain)
    try:
        return Gathered(chain, remote, probe(remote, request))
    except BaseException:
        chain.close()
        raise


@dataclass
class HostFacts:
    """What `gather_many` found on one host: facts, or why there are none."""

    host: Host
    facts: Facts | None = None
    error: str = ""
    seconds: float = 0.0
    remote_execs: int = 0


def gather_one(inv: Inventory, host: Host, request: Request, accept_new: bool = False,
               gateways: Gateways | None = None) -> HostFacts:
    """`gather` and close, never raising: a failure lands in `error`."""
    started = time.monotonic()
    try:
        g = gather(inv, host, request, accept_new, gateways)
    except Exception as e:
        return HostFacts(host, error=reason(e), seconds=time.monotonic() - started)
    try:
        return HostFacts(host, g.facts, seconds=time.monotonic() - started,
                         remote_execs=g.remote.execs)
    finally:
        g.close()


def gather_many(inv: Inventory, hosts: tuple[Host, ...] | list[Host], request: Request,
                accept_new: bool = False, forks: int = 10) -> list[HostFacts]:
    """One connection chain and one probe per host, hosts in parallel; in the order given."""
    with Gateways() as gateways, \
            ThreadPoolExecutor(max_workers=max(1, min(forks, len(hosts) or 1))) as pool:
        return list(pool.map(lambda h: gather_one(inv, h, request, accept_new, gateways), hosts))
