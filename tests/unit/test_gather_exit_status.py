"""The exit status of a probe whose output has ended: OpenSSH sends the channel's EOF
before the exit status, so it can arrive after the output did (provision.hosts.gather)."""

from __future__ import annotations

import threading

from provision.hosts.gather import exit_status


class _Channel:
    """What `exit_status` reads of a paramiko Channel: its status event and exit status."""

    def __init__(self) -> None:
        self.status_event = threading.Event()
        self.exit_status = -1

    def arrives(self, status: int) -> None:
        self.exit_status = status
        self.status_event.set()


def test_an_exit_status_that_arrives_after_the_eof_is_waited_for() -> None:
    ch = _Channel()
    later = threading.Timer(0.05, ch.arrives, (1,))
    later.start()
    try:
        assert exit_status(ch, timeout=5) == 1  # type: ignore[arg-type]
    finally:
        later.cancel()


def test_an_exit_status_already_there_is_read_at_once() -> None:
    ch = _Channel()
    ch.arrives(0)
    assert exit_status(ch, timeout=0) == 0  # type: ignore[arg-type]


def test_none_by_the_deadline_is_minus_one() -> None:
    assert exit_status(_Channel(), timeout=0.01) == -1  # type: ignore[arg-type]
