"""An exec that ends before it has read its script (`sudo -n` asking for a password exits at
once): the run says why from what the command said, whatever moment the channel closed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from provision.ssh.session import Remote, SudoPassword


class ClosedEarly:
    """A channel whose command exited with sudo's complaint before the script was sent."""

    def __init__(self) -> None:
        self.closed = False
        self.eof_received = True
        self._err = [b"sudo: a password is required\n"]

    def exec_command(self, command: str) -> None:
        self.command = command

    def sendall(self, data: bytes) -> None:
        self.closed = True
        raise OSError("Socket is closed")

    def shutdown_write(self) -> None:
        raise AssertionError("nothing to shut down: the channel is closed")

    def fileno(self) -> int:
        import os
        r, w = os.pipe()
        os.write(w, b"x")
        return r

    def recv_ready(self) -> bool:
        return False

    def recv_stderr_ready(self) -> bool:
        return bool(self._err)

    def recv_stderr(self, n: int) -> bytes:
        return self._err.pop(0)

    def exit_status_ready(self) -> bool:
        return True

    def recv_exit_status(self) -> int:
        return 1

    def close(self) -> None:
        self.closed = True


def _remote(ch: Any) -> Remote:
    transport = SimpleNamespace(open_session=lambda timeout: ch)
    chain = SimpleNamespace(host=SimpleNamespace(user="admin"),
                            conn=SimpleNamespace(transport=transport))
    return Remote(chain)  # type: ignore[arg-type]


def test_a_run_whose_sudo_exits_before_the_script_is_sent_says_sudo_wants_a_password() -> None:
    remote = _remote(ClosedEarly())
    out = remote.sh("echo hi\n")
    assert out.status == 1 and "password is required" in out.stderr
    refused = remote.refused(out.status, out.stderr)
    assert isinstance(refused, SudoPassword) and "sudo needs a password for admin" in str(refused)


def test_a_held_probe_whose_sudo_exits_early_is_handed_back_to_be_read() -> None:
    ch = ClosedEarly()
    assert _remote(ch).start("echo hi\n") is ch


def test_a_send_that_fails_while_the_command_runs_still_raises() -> None:
    class Broken(ClosedEarly):
        def __init__(self) -> None:
            super().__init__()
            self.eof_received = False

        def sendall(self, data: bytes) -> None:
            raise OSError("Socket is closed")

        def exit_status_ready(self) -> bool:
            return False

    with pytest.raises(OSError, match="Socket is closed"):
        _remote(Broken()).sh("echo hi\n")
