"""Ctrl-C that tells the truth: the one SIGINT handler of the commands that change things
(shell; the words are the caller's).

Python's default turns SIGINT into KeyboardInterrupt wherever the main thread is, and
click turns it into `Aborted!`, exit 1, saying nothing of what was applied. Instead, while
`stopping()` is active:

- the first SIGINT sets `Stop.requested` and says at once (`first()`) what finishes and
  what will not start: the command checks `requested` before each new unit of work (a
  host, a zone, a phase), lets the one in flight finish, prints its recap and exits 130;
- the second leaves at once (`os._exit(130)`), saying (`second()`) what may be half-way and
  what covers it.

`provision.hosts.interrupt` feeds it the hosts' board (`apply`); `dns apply`, `sg apply` and
`dns migrate` feed it their own words. Nothing here imports the SSH, DNS or cloud layers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C ended


class Stop:
    """Whether the user asked the command to stop; `press` is the SIGINT handler."""

    def __init__(self, say: Callable[[str], None], first: Callable[[], str],
                 second: Callable[[], list[str]],
                 leave: Callable[[int], object] = os._exit) -> None:
        self.say = say
        self.first = first
        self.second = second
        self.leave = leave
        self.event = threading.Event()
        self.presses = 0

    @property
    def requested(self) -> bool:
        return self.event.is_set()

    def press(self, signum: int = signal.SIGINT, frame: FrameType | None = None) -> None:
        self.presses += 1
        if self.presses == 1:
            self.event.set()
            self.say(self.first())
            return
        for line in self.second():
            self.say(line)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        self.leave(EXIT_INTERRUPTED)


@contextlib.contextmanager
def stopping(stop: Stop) -> Iterator[Stop]:
    """SIGINT goes to `stop.press` inside the block (main thread only: elsewhere Python
    cannot install a handler, and the block only checks `stop`)."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    before = signal.signal(signal.SIGINT, stop.press)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, before)


@contextlib.contextmanager
def asking() -> Iterator[None]:
    """Python's own SIGINT handling inside the block (a question on the terminal: Ctrl-C
    there is KeyboardInterrupt, which click's prompt turns into Abort)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
