"""The OpenSSH tunnel backend (I/O): the system `ssh -N -L ...` with the rendered config in a
private directory, a ControlMaster for remote commands. Decisions (argv, error classes)
come from `provision.tunnel.openssh_argv`."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from provision.inventory.forwards import LOCAL_BIND, Forward
from provision.inventory.model import Host, Inventory
from provision.render import render_ssh_config
from provision.ssh.errors import AuthError, ConnectError, HostKeyError
from provision.ssh.hostkeys import known_hosts_path as _known_hosts
from provision.ssh.login import Login, hops
from provision.tunnel.backends import BackendSpec, Request
from provision.tunnel.local import port_accepts
from provision.tunnel.openssh_argv import (
    classify_ssh_error,
    is_host_key_failure,
    openssh_exec_argv,
    openssh_tunnel_argv,
)
from provision.tunnel.openssh_auth import auth_failure

Log = Callable[[str], None]


def known_hosts_path(inv: Inventory) -> str:
    return str(_known_hosts(inv.known_hosts))


def write_ssh_config(inv: Inventory, login: Login, directory: str) -> str:
    """Render the inventory's ssh_config for this login into a private file; return its path."""
    text = render_ssh_config(inv, user=login.user, identity_file=login.identity_file,
                             known_hosts=known_hosts_path(inv))
    path = os.path.join(directory, "ssh_config")
    # a fresh file in our own mkdtemp directory: never an existing one, never a symlink
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def private_dir() -> str:
    """A 0700 temp directory (short path: it holds the ssh control socket)."""
    base = "/tmp" if os.path.isdir("/tmp") else None
    return tempfile.mkdtemp(prefix="provision-tun-", dir=base)


def find_ssh() -> str | None:
    return shutil.which("ssh")


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
                stderr = "".join(self._stderr)
                self.proc = None
                refused = auth_failure(stderr, self.chain)  # which hop, which key
                if refused:
                    raise AuthError(refused)
                reason = self._name_hops(classify_ssh_error(stderr))
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

    def hold(self, fwd: Forward, held: bool) -> None:
        """Cancel the forward on the master connection (`ssh -O cancel`), or add it back."""
        if self.proc is None:
            return
        to = fwd.remote_socket or f"{fwd.remote_host}:{fwd.remote_port}"
        argv = [self.ssh, "-S", self.control, "-O", "cancel" if held else "forward",
                "-L", f"{LOCAL_BIND}:{fwd.local_port}:{to}", self.target.address]
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10,
                           start_new_session=True)

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




def _unavailable() -> str | None:
    return None if find_ssh() else "no `ssh` on PATH"


def _make(r: Request) -> OpenSSHBackend:
    return OpenSSHBackend(r.inv, r.host, r.login, r.forwards, r.keepalive, r.log)


BACKEND = BackendSpec("openssh", "the system ssh (the default when installed)", _unavailable, _make)
