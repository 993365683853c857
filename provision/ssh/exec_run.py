"""`provision exec` on one host (I/O): run the command over the host's open chain, keep its
output (capped), stop it on the host when told to (Ctrl-C, --timeout). Decisions come from
`provision.ssh.exec_plan`."""

from __future__ import annotations

import contextlib
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import paramiko

from .connect import Chain
from .exec_plan import MAX_PGID_PREFIX, Capped, kill_command, remote_command, split_pgid

POLL = 0.1  # how often a wait looks at the stop flag and the deadline
KILL_TIMEOUT = 5.0
Stream = Literal["out", "err"]
OnLine = Callable[[Stream, str], None]


@dataclass
class Ran:
    exit_status: int | None
    stdout: Capped
    stderr: Capped
    timed_out: bool = False
    interrupted: bool = False
    kill_error: str = ""


class _Lines:
    """Complete lines of a stream, for --stream (the last partial one at the end)."""

    def __init__(self, stream: Stream, on_line: OnLine | None) -> None:
        self.stream = stream
        self.on_line = on_line
        self.pending = b""

    def feed(self, data: bytes) -> None:
        if self.on_line is None:
            return
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            self.on_line(self.stream, line.decode("utf-8", "replace"))

    def flush(self) -> None:
        if self.on_line is not None and self.pending:
            self.on_line(self.stream, self.pending.decode("utf-8", "replace"))
        self.pending = b""


def run(chain: Chain, command: str, *, sudo: bool, cap: int, timeout: float | None,
        stop: threading.Event, on_line: OnLine | None = None) -> Ran:
    """Run `command` on the chain's host; return when it exits, `timeout` passes or `stop`
    is set (then its process group is killed on the host before we return)."""
    transport: paramiko.Transport = chain.conn.transport
    out, err = Capped(cap), Capped(cap)
    lines_out, lines_err = _Lines("out", on_line), _Lines("err", on_line)
    head = b""
    seeking = True
    pgid: int | None = None
    deadline = None if timeout is None else time.monotonic() + timeout
    ch = transport.open_session(timeout=KILL_TIMEOUT * 2)
    ran = Ran(None, out, err)

    def take_out(data: bytes) -> None:
        kept = len(out.kept)
        out.add(data)
        lines_out.feed(bytes(out.kept[kept:]))

    def take_err(data: bytes) -> None:
        kept = len(err.kept)
        err.add(data)
        lines_err.feed(bytes(err.kept[kept:]))

    try:
        ch.exec_command(remote_command(command, sudo))
        ch.shutdown_write()  # no stdin: a command that reads it sees EOF
        while True:
            if stop.is_set():
                ran.interrupted = True
                break
            if deadline is not None and time.monotonic() >= deadline:
                ran.timed_out = True
                break
            select.select([ch], [], [], POLL)
            while ch.recv_ready():
                data = ch.recv(65536)
                if seeking:  # the pid line first, then the command's own output
                    head += data
                    pgid, rest = split_pgid(head)
                    if pgid is None and len(head) < MAX_PGID_PREFIX and b"\n" not in head:
                        continue
                    seeking, head, data = False, b"", rest
                take_out(data)
            while ch.recv_stderr_ready():
                take_err(ch.recv_stderr(65536))
            if (ch.exit_status_ready() and ch.eof_received and not ch.recv_ready()
                    and not ch.recv_stderr_ready()):
                ran.exit_status = ch.recv_exit_status()
                break
            if ch.closed and not ch.recv_ready() and not ch.recv_stderr_ready():
                ran.exit_status = ch.recv_exit_status() if ch.exit_status_ready() else None
                break
        if (ran.interrupted or ran.timed_out) and seeking:
            # stopped before the pid line came: the command may be starting; wait for it
            pgid = _pid_line(ch, head)
        if (ran.interrupted or ran.timed_out) and pgid is not None:
            ran.kill_error = _kill(transport, pgid, sudo)
    finally:
        lines_out.flush()
        lines_err.flush()
        with contextlib.suppress(Exception):
            ch.close()
    return ran


def _pid_line(ch: paramiko.Channel, head: bytes, wait: float = KILL_TIMEOUT) -> int | None:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not ch.closed:
        pgid, _ = split_pgid(head)
        if pgid is not None or b"\n" in head or len(head) >= MAX_PGID_PREFIX:
            return pgid
        select.select([ch], [], [], POLL)
        while ch.recv_ready():
            head += ch.recv(MAX_PGID_PREFIX)
        if ch.exit_status_ready() and not ch.recv_ready():
            break
    return split_pgid(head)[0]


def _kill(transport: paramiko.Transport, pgid: int, sudo: bool) -> str:
    """Stop the command's process group on the host; "" or why it could not."""
    try:
        k = transport.open_session(timeout=KILL_TIMEOUT)
    except (paramiko.SSHException, OSError, EOFError) as e:
        return f"could not stop the remote command: {e}"
    try:
        k.settimeout(KILL_TIMEOUT)
        k.exec_command(kill_command(pgid, sudo))
        k.shutdown_write()
        deadline = time.monotonic() + KILL_TIMEOUT
        while not k.exit_status_ready() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not k.exit_status_ready():
            return "could not stop the remote command: no answer to kill"
        status = k.recv_exit_status()
        # a group already gone is fine: the command ended on its own meanwhile
        return "" if status in (0, 1) else f"kill exited {status}"
    except (paramiko.SSHException, OSError, EOFError) as e:
        return f"could not stop the remote command: {e}"
    finally:
        k.close()
