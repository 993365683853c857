"""The tunnel's I/O: local ports, the OpenSSH backend, and the session that keeps it alive.

Decisions come from `provision.tunnel`; this module only binds, spawns, polls and reports.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from provision.inventory.model import Host, Inventory, Service
from provision.tunnel import (
    LOCAL_BIND,
    ConnectError,
    Forward,
    HostKeyError,
    Login,
    Row,
    ServiceState,
    backoff,
    classify_ssh_error,
    hops,
    is_host_key_failure,
    nothing_listening,
    openssh_exec_argv,
    openssh_tunnel_argv,
    parse_probe,
    probe_command,
    rows,
    service_state,
)

Log = Callable[[str], None]


class Backend(Protocol):
    name: str

    def connect(self, timeout: float = 10.0) -> None: ...
    def alive(self) -> str | None: ...
    def disconnect(self) -> None: ...
    def run(self, command: str, timeout: float = 20.0) -> tuple[int, str]: ...
    def probe(self, fwd: Forward, timeout: float = 5.0) -> bool | None: ...
    def close(self) -> None: ...


# --- local ports -----------------------------------------------------------------------

def port_is_free(port: int) -> bool:
    """Can we listen on 127.0.0.1:port (as ssh would, with SO_REUSEADDR)?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOCAL_BIND, port))
        except OSError:
            return False
    return True


def port_accepts(port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((LOCAL_BIND, port), timeout=timeout):
            return True
    except OSError:
        return False


def known_hosts_path(inv: Inventory) -> str:
    return os.path.expanduser(inv.known_hosts or "~/.ssh/known_hosts")


def write_ssh_config(inv: Inventory, login: Login, directory: str) -> str:
    """Render the inventory's ssh_config for this login into a private file; return its path."""
    from provision.render import render_ssh_config

    text = render_ssh_config(inv, user=login.user, identity_file=login.identity_file,
                             known_hosts=known_hosts_path(inv))
    path = os.path.join(directory, "ssh_config")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def private_dir() -> str:
    """A 0700 temp directory (short path: it holds the ssh control socket)."""
    base = "/tmp" if os.path.isdir("/tmp") else None
    return tempfile.mkdtemp(prefix="provision-tun-", dir=base)


def find_ssh() -> str | None:
    return shutil.which("ssh")


def http_answers(port: int, path: str = "/", timeout: float = 10.0) -> str | None:
    """GET path on the local forward; the status line, or None when nothing answered."""
    try:
        with socket.create_connection((LOCAL_BIND, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(f"GET {path} HTTP/1.0\r\nHost: {LOCAL_BIND}:{port}\r\n\r\n".encode())
            data = b""
            while b"\r\n" not in data and len(data) < 4096:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    line = data.split(b"\r\n", 1)[0].decode(errors="replace")
    return line if line.startswith("HTTP/") else None


# --- OpenSSH backend ----------------------------------------------------------------------

class OpenSSHBackend:
    """The system `ssh -N -L …` with the rendered config, a ControlMaster for remote commands."""

    name = "openssh"

    def __init__(self, inv: Inventory, host: Host, login: Login, forwards: Sequence[Forward],
                 keepalive: int, log: Log, ssh: str | None = None):
        self.ssh = ssh or find_ssh() or "ssh"
        self.host = host
        self.chain = hops(inv, host, login)
        self.target = self.chain[-1]
        self.jumps = [b.name for b in inv.chain(host)]
        self.forwards = tuple(forwards)
        self.keepalive = keepalive
        self.log = log
        self.known_hosts = known_hosts_path(inv)
        self.dir = private_dir()
        self.config = write_ssh_config(inv, login, self.dir)
        self.control = os.path.join(self.dir, "ctl")
        self.proc: subprocess.Popen[bytes] | None = None
        self._stderr: list[str] = []
        self._reader: threading.Thread | None = None

    def argv(self) -> list[str]:
        return openssh_tunnel_argv(self.ssh, self.config, self.target, self.jumps, self.forwards,
                                   self.known_hosts, self.keepalive, self.control)

    def connect(self, timeout: float = 15.0) -> None:
        self._stderr = []
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.control)
        proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
        self.proc = proc
        self._reader = threading.Thread(target=self._read_stderr, args=(proc,), daemon=True,
                                        name="tunnel-ssh-stderr")
        self._reader.start()
        deadline = time.monotonic() + timeout
        pending = [f.local_port for f in self.forwards]
        while pending:
            if proc.poll() is not None:
                self._reader.join(timeout=2)
                reason = self._name_hops(classify_ssh_error("".join(self._stderr)))
                self.proc = None
                if is_host_key_failure(reason):
                    raise HostKeyError(reason)
                raise ConnectError(reason)
            if time.monotonic() > deadline:
                self.disconnect()
                raise ConnectError(f"{self.host.name}: forwards not ready after {timeout:.0f}s")
            pending = [p for p in pending if not _listening(p)]
            if pending:
                time.sleep(0.01)

    def _name_hops(self, reason: str) -> str:
        """`… known for 10.0.1.21 …` → `… known for 10.0.1.21 (gpu1) …`."""
        for hop in self.chain:
            reason = re.sub(rf"(?<![\w.:]){re.escape(hop.address)}(?![\w.:])",
                            f"{hop.address} ({hop.name})", reason, count=1)
        return reason

    def _read_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace")
            self._stderr.append(line)
            if "open failed" in line and "connect failed" in line:
                self.log(f"{self.host.name}: {line.strip()}")

    def alive(self) -> str | None:
        proc = self.proc
        if proc is None:
            return "not connected"
        rc = proc.poll()
        if rc is None:
            return None
        if self._reader is not None:
            self._reader.join(timeout=2)
        return f"ssh exited ({rc}): {classify_ssh_error(''.join(self._stderr))}"

    def disconnect(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            # the ssh and its ProxyJump helpers share the session we started it in
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)  # leftover jump helpers, if any
        if proc.stderr is not None:
            proc.stderr.close()

    def run(self, command: str, timeout: float = 20.0) -> tuple[int, str]:
        argv = openssh_exec_argv(self.ssh, self.config, self.target, self.jumps, command,
                                 self.known_hosts, self.keepalive,
                                 self.control if self.proc else None)
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired:
            return 124, "timed out"
        return done.returncode, (done.stdout + done.stderr).decode(errors="replace")

    def probe(self, fwd: Forward, timeout: float = 5.0) -> bool | None:
        return None  # the remote probe command checks listening for this backend

    def close(self) -> None:
        self.disconnect()
        shutil.rmtree(self.dir, ignore_errors=True)


def _listening(port: int) -> bool:
    """Is 127.0.0.1:port in LISTEN state? (/proc on Linux: no connection made; else connect)."""
    path = Path("/proc/net/tcp")
    if not path.exists():
        return port_accepts(port)
    want = f"0100007F:{port:04X}"
    try:
        for line in path.read_text().splitlines()[1:]:
            parts = line.split()
            if len(parts) > 3 and parts[1] == want and parts[3] == "0A":
                return True
    except OSError:
        return port_accepts(port)
    return False


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

    def start(self) -> list[Row]:
        t0 = time.monotonic()
        self.backend.connect()
        self.ready_after = time.monotonic() - t0
        self.inspect()
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
        self.states = states

    def supervise(self, stop: threading.Event) -> None:
        """Until `stop`: watch the link; when it dies, reconnect with backoff and say so."""
        poll = max(0.2, min(1.0, self.keepalive / 2))
        while not stop.wait(poll):
            reason = self.backend.alive()
            if reason is None:
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
