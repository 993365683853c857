"""Remote execution over an open connection (I/O): one exec per call, script on stdin, counted.

Runs `sh -s -- ARGS` (behind `sudo -n` when the login user is not root) on a raw paramiko
session channel of the host's `provision.ssh.link.Link`: the script goes in over stdin,
stdout and stderr come back whole. `execs` counts remote commands, so tests and --json can prove that a
no-op converge costs exactly one.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from dataclasses import dataclass
from shlex import quote
from typing import Any

from provision.errors import OperationError

from .connect import Chain


class RemoteTimeout(OperationError):
    pass


class SudoPassword(OperationError):
    """The login user's sudo wants a password; provision runs `sudo -n` and never types one."""


# what `sudo -n` says (exit 1, before the script runs) when it would have to ask
SUDO_ASKS = ("sudo: a password is required", "sudo: a terminal is required")


@dataclass
class Output:
    status: int
    stdout: str
    stderr: str


class Remote:
    def __init__(self, chain: Chain):
        self.chain = chain
        self.sudo = chain.host.user != "root"
        self.execs = 0

    def _command(self, args: list[str] | tuple[str, ...]) -> str:
        argv = ["sh", "-s", "--", *args]
        if self.sudo:
            argv = ["sudo", "-n", "--", *argv]
        return " ".join(quote(a) for a in argv)

    def refused(self, status: int, stderr: str) -> SudoPassword | None:
        """The exec never ran because sudo wanted a password: say that, not "probe exited 1"."""
        if not self.sudo or status != 1 or not stderr.strip().startswith(SUDO_ASKS):
            return None
        user = self.chain.host.user
        return SudoPassword(f"sudo needs a password for {user} (provision runs sudo -n): "
                            f"give {user} NOPASSWD sudo, or log in as root")

    def start(self, script: str, args: list[str] | tuple[str, ...] = ()) -> Any:
        """One exec like `sh`, left running with its stdin open: the caller reads its output
        and closes the channel (the host lock's held probe, provision.hosts.gather)."""
        self.execs += 1
        ch = self.chain.conn.transport.open_session(timeout=30)
        try:
            ch.exec_command(self._command(args))
            _send(ch, script)
        except BaseException:
            ch.close()
            raise
        return ch

    def sh(self, script: str, args: list[str] | tuple[str, ...] = (),
           timeout: float | None = None,
           on_line: Callable[[str], None] | None = None) -> Output:
        """Run `script`; `on_line` is called with each whole stdout line as it arrives (a
        batch's progress markers), from this thread."""
        command = self._command(args)
        transport = self.chain.conn.transport
        self.execs += 1
        ch = transport.open_session(timeout=30)
        try:
            ch.exec_command(command)
            if _send(ch, script):
                ch.shutdown_write()
            out: list[bytes] = []
            err: list[bytes] = []
            seen = 0  # bytes of `out` already handed to `on_line`
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                ready, _, _ = select.select([ch], [], [], wait)
                if not ready and deadline is not None and time.monotonic() >= deadline:
                    raise RemoteTimeout(f"no answer within {timeout:g}s")
                while ch.recv_ready():
                    out.append(ch.recv(65536))
                    if on_line is not None:
                        seen = _lines(out, seen, on_line)
                while ch.recv_stderr_ready():
                    err.append(ch.recv_stderr(65536))
                if (ch.exit_status_ready() and ch.eof_received and not ch.recv_ready()
                        and not ch.recv_stderr_ready()):
                    break
                if ch.closed and not ch.recv_ready() and not ch.recv_stderr_ready():
                    break
            status = ch.recv_exit_status() if ch.exit_status_ready() else -1
            return Output(status, b"".join(out).decode("utf-8", "replace"),
                          b"".join(err).decode("utf-8", "replace"))
        finally:
            ch.close()


def _send(ch: Any, script: str) -> bool:
    """The script on the exec's stdin; False when the command ended before reading all of
    it (`sudo -n` that wants a password exits at once, and the channel closes while the
    script is still being sent): what it said and its status tell why, not "Socket is
    closed", which only says when the close happened to come."""
    try:
        ch.sendall(script.encode())
    except OSError:
        if ch.closed or ch.exit_status_ready() or ch.eof_received:
            return False
        raise
    return True


def _lines(out: list[bytes], seen: int, on_line: Callable[[str], None]) -> int:
    """Hand each whole line of `out` after byte `seen` to `on_line`; the new `seen`."""
    data = b"".join(out)
    end = data.rfind(b"\n") + 1
    if end > seen:
        for raw in data[seen:end].splitlines():
            on_line(raw.decode("utf-8", "replace"))
        return end
    return seen
