"""`provision exec` on one host (I/O): run the command over the host's open chain, keep its
output (capped), stop it on the host when told to (Ctrl-C, --timeout). Decisions come from
`provision.ssh.exec_plan`."""

from __future__ import annotations

import contextlib
import secrets
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import paramiko

from .connect import Chain
from .exec_plan import (
    Capped,
    Marker,
    Stop,
    remote_command,
    stop_command,
    stop_outcome,
    stop_refusal,
)

POLL = 0.1  # how often a wait looks at the stop flag and the deadline
KILL_TIMEOUT = 5.0
STOP_ERR_CAP = 2000  # bytes of the stop command's stderr kept for the reason
Stream = Literal["out", "err"]
OnLine = Callable[[Stream, str], None]


@dataclass
class Ran:
    exit_status: int | None
    stdout: Capped
    stderr: Capped
    timed_out: bool = False
    interrupted: bool = False
    stop: Stop | None = None  # what came of stopping it (None: it was not to be stopped)


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


class _Reader:
    """The command's channel: stdout (less this run's marker) and stderr into their caps
    and --stream lines."""

    def __init__(self, ch: paramiko.Channel, marker: Marker, cap: int,
                 on_line: OnLine | None) -> None:
        self.ch = ch
        self.marker = marker
        self.out, self.err = Capped(cap), Capped(cap)
        self.lines_out, self.lines_err = _Lines("out", on_line), _Lines("err", on_line)

    def _take(self, capped: Capped, lines: _Lines, data: bytes) -> None:
        kept = len(capped.kept)
        capped.add(data)
        lines.feed(bytes(capped.kept[kept:]))

    def drain(self) -> None:
        """Read what has arrived, without waiting."""
        while self.ch.recv_ready():
            self._take(self.out, self.lines_out, self.marker.feed(self.ch.recv(65536)))
        while self.ch.recv_stderr_ready():
            self._take(self.err, self.lines_err, self.ch.recv_stderr(65536))

    def wait(self, seconds: float) -> None:
        select.select([self.ch], [], [], seconds)
        self.drain()

    def ended(self) -> bool:
        """The command has exited (or its channel closed) and all its output is read."""
        ch = self.ch
        if ch.recv_ready() or ch.recv_stderr_ready():
            return False
        return bool(ch.exit_status_ready() and ch.eof_received) or ch.closed

    def exited(self) -> bool:
        """An exit status came from the host (the command itself has ended), or the
        channel is gone."""
        return self.ch.closed or (self.ch.exit_status_ready() and self.ch.exit_status != -1)

    def finish(self) -> None:
        self._take(self.out, self.lines_out, self.marker.end())
        self.lines_out.flush()
        self.lines_err.flush()


def new_nonce() -> str:
    return secrets.token_hex(16)


def run(chain: Chain, command: str, *, sudo: bool, cap: int, timeout: float | None,
        stop: threading.Event, on_line: OnLine | None = None, nonce: str | None = None) -> Ran:
    """Run `command` on the chain's host; return when it exits, `timeout` passes or `stop`
    is set (then its process group is stopped on the host, if it is this run's, before we
    return: `Ran.stop` says what came of it)."""
    transport: paramiko.Transport = chain.conn.transport
    nonce = nonce or new_nonce()
    deadline = None if timeout is None else time.monotonic() + timeout
    ch = transport.open_session(timeout=KILL_TIMEOUT * 2)
    reader = _Reader(ch, Marker(nonce), cap, on_line)
    ran = Ran(None, reader.out, reader.err)
    try:
        ch.exec_command(remote_command(command, sudo, nonce))
        ch.shutdown_write()  # no stdin: a command that reads it sees EOF
        while True:
            reader.wait(POLL)
            # an ended command is never "stopped": this looks first, every round
            if reader.ended():
                ran.exit_status = _exit_status(ch)
                break
            if stop.is_set():
                ran.interrupted = True
                break
            if deadline is not None and time.monotonic() >= deadline:
                ran.timed_out = True
                break
        if ran.interrupted or ran.timed_out:
            ran.stop = _stop(transport, reader, nonce, sudo)
            if ran.stop.outcome == "ended":
                ran.exit_status = _exit_status(ch)
    finally:
        reader.finish()
        with contextlib.suppress(Exception):
            ch.close()
    return ran


def _exit_status(ch: paramiko.Channel) -> int | None:
    """The command's exit status; None when the host sent none (it died of a signal)."""
    status = ch.recv_exit_status() if ch.exit_status_ready() else -1
    return None if status == -1 else status


def _stop(transport: paramiko.Transport, reader: _Reader, nonce: str, sudo: bool) -> Stop:
    """Stop the command on the host, once sure of its process group; say what came of it."""
    deadline = time.monotonic() + KILL_TIMEOUT
    # stopped before the marker came: the command may be starting; wait for it
    while not reader.marker.seen and not reader.exited() and time.monotonic() < deadline:
        reader.wait(POLL)
    if reader.ended():
        return Stop("ended")
    # an exit status in hand, its output still open: it ended, leaving processes behind
    exited = reader.exited()
    pgid = reader.marker.pgid
    refusal = stop_refusal(pgid)
    if refusal is not None or pgid is None:
        result = Stop("not stopped", refusal or "")
    else:
        result = _kill(transport, stop_command(pgid, nonce, sudo))
        if result.outcome == "ended":  # the host found no such group: the channel ends too
            result = _ended(reader, pgid)
    if not exited:
        return result
    left = {"stopped": "what it left running was stopped", "ended": ""}.get(
        result.outcome, f"what it left running was not stopped: {result.reason}")
    return Stop("ended", left)


def _ended(reader: _Reader, pgid: int) -> Stop:
    """The host found the group gone: the command's exit status and the rest of its output
    come (else the host's word was wrong, and it may be running still)."""
    deadline = time.monotonic() + KILL_TIMEOUT
    while not reader.ended() and time.monotonic() < deadline:
        reader.wait(POLL)
    if reader.ended() or reader.exited():
        return Stop("ended")
    return Stop("not stopped", f"the host found no process group {pgid}, yet the command's "
                "session is still open")


def _kill(transport: paramiko.Transport, command: str) -> Stop:
    """Run the stop command in a new session of the same connection."""
    try:
        k = transport.open_session(timeout=KILL_TIMEOUT)
    except (paramiko.SSHException, OSError, EOFError) as e:
        return Stop("not stopped", f"could not open a session to stop it: {e}")
    err = b""
    try:
        k.settimeout(KILL_TIMEOUT)
        k.exec_command(command)
        k.shutdown_write()
        deadline = time.monotonic() + KILL_TIMEOUT
        # its stderr says why when it refuses: read until the exit status and the EOF
        while time.monotonic() < deadline:
            while k.recv_stderr_ready():
                err = (err + k.recv_stderr(4096))[:STOP_ERR_CAP]
            while k.recv_ready():
                k.recv(4096)
            if k.exit_status_ready() and (k.eof_received or k.closed) \
                    and not k.recv_stderr_ready():
                break
            time.sleep(0.02)
        return stop_outcome(_exit_status(k) if k.exit_status_ready() else None,
                            err.decode("utf-8", "replace"))
    except (paramiko.SSHException, OSError, EOFError) as e:
        if k.exit_status_ready():
            # the stop command ran and its channel closed before our side was done with it
            # (exec's reply or our EOF came after the close: "Channel closed."): its status
            # and what it said are the answer, whichever moment the close came
            while k.recv_stderr_ready():
                err = (err + k.recv_stderr(4096))[:STOP_ERR_CAP]
            return stop_outcome(_exit_status(k), err.decode("utf-8", "replace"))
        return Stop("not stopped", f"could not stop the remote command: {e}")
    finally:
        k.close()
