"""Ctrl-C during a converge: `provision.interrupt`'s handler fed the hosts' board (the
words are `provision.hosts.progress`'s).

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

import os
import time
from collections.abc import Callable

from provision.interrupt import EXIT_INTERRUPTED, asking, stopping
from provision.interrupt import Stop as _Stop

from .progress import Board, leaving_lines, stopping_line

__all__ = ["EXIT_INTERRUPTED", "Stop", "asking", "stopping"]


class Stop(_Stop):
    """Whether the user asked the run to stop; what each press says is read from `board`."""

    def __init__(self, board: Board, say: Callable[[str], None],
                 leave: Callable[[int], object] = os._exit,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.board = board
        self.clock = clock
        super().__init__(say, lambda: stopping_line(board.snapshot(), clock()),
                         lambda: leaving_lines(board.snapshot(), clock()), leave=leave)
