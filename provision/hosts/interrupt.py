"""Ctrl-C during a converge: the one SIGINT handler (shell; the words are
`provision.hosts.progress`'s).

Python's default turns SIGINT into KeyboardInterrupt in the main thread, which is waiting
on the pool: `ThreadPoolExecutor.__exit__` then runs every host still queued to the end,
and click turns what finally arrives into `Aborted!`, exit 1, no recap: everything had been
applied and the user was told nothing. Instead, while `stopping()` is active:

- the first SIGINT sets `Stop.requested`: no new host and no new wave starts (the caller
  checks it before starting each), the hosts already changing finish (their commit-confirmed
  changes confirm or roll back as designed), and a line says at once how many are finishing
  and how many will not start; the caller then prints the recap and exits 130;
- the second leaves at once (`os._exit(130)`), saying per host in flight what may be
  half-way and what on the host covers it (the batch's temp-and-rename, the rollback timer).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

from .progress import Board, leaving_lines, stopping_line

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C ended


class Stop:
    """Whether the user asked the run to stop; `press` is the SIGINT handler."""

    def __init__(self, board: Board, say: Callable[[str], None],
                 leave: Callable[[int], object] = os._exit,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.board = board
        self.say = say
        self.leave = leave
        self.clock = clock
        self.event = threading.Event()
        self.presses = 0

    @property
    def requested(self) -> bool:
        return self.event.is_set()

    def press(self, signum: int = signal.SIGINT, frame: FrameType | None = None) -> None:
        self.presses += 1
        if self.presses == 1:
            self.event.set()
            self.say(stopping_line(self.board.snapshot(), self.clock()))
            return
        for line in leaving_lines(self.board.snapshot(), self.clock()):
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
