"""A tunnel session (I/O): connect a backend, learn tokens and listening state, keep the
link up until told to stop. The `Backend` protocol is what `openssh` and `paramiko_backend`
implement; decisions come from the pure modules beside it (`ports`, `tokens`, `status`,
`backoff`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from provision.errors import OperationError
from provision.inventory.forwards import Forward
from provision.inventory.model import Host, Service
from provision.ssh.errors import ConnectError, HostKeyError
from provision.tunnel.backoff import backoff
from provision.tunnel.status import Row, nothing_listening, rows
from provision.tunnel.tokens import (
    ServiceState,
    held_by,
    held_note,
    owners_command,
    parse_probe,
    probe_command,
    service_state,
)

Log = Callable[[str], None]
T = TypeVar("T")
POLL = 0.05  # how often a wait looks at the stop flag (Ctrl-C lands within this)
WATCH_SECONDS = 5.0  # how often who listens on the forwarded loopback ports is asked again


class Interrupted(OperationError):
    """Stopped (Ctrl-C, SIGTERM, SIGHUP) while waiting on the network."""


def until_stopped(fn: Callable[[], T], stop: threading.Event | None) -> T:
    """Run `fn` in a daemon thread and wait for it, or for `stop`: then raise Interrupted
    at once (the caller's clean-up closes the backend, which ends the thread)."""
    if stop is None:
        return fn()
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as e:
            box["error"] = e
        done.set()

    threading.Thread(target=target, daemon=True, name="tunnel-wait").start()
    while not done.wait(POLL):
        if stop.is_set():
            raise Interrupted("interrupted")
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result


class Backend(Protocol):
    name: str

    def connect(self, timeout: float = 10.0) -> None: ...
    def alive(self) -> str | None: ...
    def disconnect(self) -> None: ...
    def run(self, command: str, timeout: float = 20.0) -> tuple[int, str]: ...
    def probe(self, fwd: Forward, timeout: float = 5.0) -> bool | None: ...
    def hold(self, fwd: Forward, held: bool) -> None: ...
    def close(self) -> None: ...


# --- the session ----------------------------------------------------------------------------

class Session:
    """Connect, learn tokens and listening state, then keep the link up until told to stop."""

    def __init__(self, backend: Backend, host: Host, services: Sequence[Service],
                 forwards: Sequence[Forward], login_user: str, keepalive: int, log: Log):
        self.backend = backend
        self.host = host
        self.services = tuple(services)
        self.forwards = tuple(forwards)
        self.login_user = login_user
        self.keepalive = keepalive
        self.log = log
        self.states: dict[str, ServiceState] = {}
        self.ready_after: float | None = None
        self.held: dict[str, tuple[str, ...]] = {}  # service -> the uids in its place

    def start(self, stop: threading.Event | None = None) -> list[Row]:
        """Connect and inspect; `stop` set meanwhile raises Interrupted within POLL s."""
        t0 = time.monotonic()
        until_stopped(self.backend.connect, stop)
        self.ready_after = time.monotonic() - t0
        until_stopped(self.inspect, stop)
        return rows(self.forwards, self.states, self.host.name)

    def inspect(self) -> None:
        """Ask the host for tokens and listening state; report services nobody listens on."""
        direct = {f.service: self.backend.probe(f) for f in self.forwards}
        check_remote = any(v is None for v in direct.values())
        command = probe_command(self.services, self.login_user, check_remote)
        try:
            _rc, out = self.backend.run(command)
        except Exception as e:  # a failed probe must not take the tunnel down
            out = ""
            self.log(f"{self.host.name}: could not query services: {e}")
        sections = parse_probe(out)
        states = {}
        for s, f in zip(self.services, self.forwards, strict=True):
            st = service_state(s, sections.get(s.name, {}), self.login_user)
            if direct[f.service] is not None:
                st = ServiceState(direct[f.service], st.token, st.base_url, st.note)
            states[s.name] = st
            if st.listening is False:
                self.log(nothing_listening(f, self.host.name))
            self._hold(s, f, st.held_by, quiet=True)
        self.states = states

    def watch(self) -> None:
        """Who listens on the forwarded loopback ports, again: a forward stops while another
        account holds its service's port (it took the port while the service restarted), and
        resumes once the service's own account listens there again."""
        tcp = [(s, f) for s, f in zip(self.services, self.forwards, strict=True) if s.socket is None]
        if not tcp:
            return
        try:
            _rc, out = self.backend.run(owners_command([s for s, _ in tcp]), timeout=10)
        except Exception:  # a failed look is no news: the link's own check handles a dead one
            return
        sections = parse_probe(out)
        for s, f in tcp:
            if "owners" in sections.get(s.name, {}):
                self._hold(s, f, held_by(s, sections[s.name]))

    def _hold(self, s: Service, f: Forward, others: tuple[str, ...], quiet: bool = False) -> None:
        if others == self.held.get(s.name, ()):
            return
        self.backend.hold(f, bool(others))
        if others:
            self.held[s.name] = others
            self.log(f"{self.host.name}: {s.name}: {held_note(s, others)}")
        else:
            self.held.pop(s.name, None)
            if not quiet:
                self.log(f"{self.host.name}: {s.name}: forwarded again: port {s.port} is "
                         f"{s.user}'s again")

    def supervise(self, stop: threading.Event) -> None:
        """Until `stop`: watch the link; when it dies, reconnect with backoff and say so."""
        poll = max(0.2, min(1.0, self.keepalive / 2))
        next_watch = time.monotonic() + WATCH_SECONDS
        while not stop.wait(poll):
            reason = self.backend.alive()
            if reason is None:
                if time.monotonic() >= next_watch:
                    self.watch()
                    next_watch = time.monotonic() + WATCH_SECONDS
                continue
            self.log(f"{self.host.name}: link lost: {reason}")
            self.backend.disconnect()
            attempt = 0
            while not stop.is_set():
                delay = backoff(attempt)
                self.log(f"{self.host.name}: reconnecting in {delay:.0f}s (attempt {attempt + 1})")
                if stop.wait(delay):
                    return
                try:
                    self.backend.connect()
                except HostKeyError:
                    raise
                except ConnectError as e:
                    self.log(f"{self.host.name}: reconnect failed: {e}")
                    attempt += 1
                    continue
                self.log(f"{self.host.name}: reconnected")
                self.inspect()
                break

    def close(self) -> None:
        self.backend.close()
