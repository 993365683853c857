"""`provision exec`'s runner over a stand-in channel (no SSH): a command that has ended when
the deadline or Ctrl-C comes is reported as ended, by its exit status, and nothing is sent to
stop it. (The real stops, against processes, are in tests/integration/test_exec_stop.py.)"""

from __future__ import annotations

import os
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from provision.ssh import exec_run


class Channel:
    """A session whose command has already ended: its output, exit status and EOF are in."""

    def __init__(self, stdout: bytes, status: int) -> None:
        self.out = stdout
        self.exit_status = status
        self.eof_received = True
        self.closed = False
        self.commands: list[str] = []
        self._r, self._w = os.pipe()
        os.write(self._w, b"x")  # always readable: select returns at once

    def fileno(self) -> int:
        return self._r

    def exec_command(self, command: str) -> None:
        self.commands.append(command)

    def shutdown_write(self) -> None:
        pass

    def recv_ready(self) -> bool:
        return bool(self.out)

    def recv(self, n: int) -> bytes:
        data, self.out = self.out[:n], self.out[n:]
        return data

    def recv_stderr_ready(self) -> bool:
        return False

    def exit_status_ready(self) -> bool:
        return True

    def recv_exit_status(self) -> int:
        return self.exit_status

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self._r)
            os.close(self._w)


class Transport:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.sessions = 0

    def open_session(self, timeout: float | None = None) -> Channel:
        self.sessions += 1
        if self.sessions > 1:
            raise AssertionError("a second session: a stop was sent for an ended command")
        return self.channel


NONCE = "ab" * 16


@pytest.mark.parametrize("when", ["deadline", "ctrl-c"])
def test_a_command_that_ended_as_the_stop_came_is_ended_not_stopped(when: str) -> None:
    """Before, the runner looked at the deadline and the stop flag before reading what had
    come: a command whose output, exit status and EOF were already in was `timeout` (or
    `interrupted`) and a stop was sent for it."""
    ch = Channel(f"provision-exec-{NONCE} 4242\nhello\n".encode(), 0)
    transport = Transport(ch)
    chain: Any = SimpleNamespace(conn=SimpleNamespace(transport=transport))
    stop = threading.Event()
    if when == "ctrl-c":
        stop.set()
    ran = exec_run.run(chain, "echo hello", sudo=False, cap=1024,
                       timeout=0.0 if when == "deadline" else None, stop=stop, nonce=NONCE)
    assert (ran.timed_out, ran.interrupted, ran.stop) == (False, False, None)
    assert ran.exit_status == 0 and ran.stdout.text() == "hello\n"
    assert transport.sessions == 1
