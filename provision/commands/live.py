"""The converge's live progress on stderr (rich), drawn from a `provision.hosts.progress`
board: one line per host being worked on, and how many are done and waiting.

Only on a terminal and without `--json`; elsewhere nothing is drawn and the lines that
matter (a host lock being waited for, Ctrl-C's) are printed as plain lines.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

from rich.console import RenderableType
from rich.live import Live
from rich.text import Text

from provision.hosts.progress import Board, describe
from provision.text import printable

from .common import console, echo

SHOWN = 20  # hosts listed at most; the rest are counted


def wanted(as_json: bool) -> bool:
    """Draw progress: stderr is a terminal and the output is not --json."""
    return not as_json and sys.stderr.isatty()


def render_lines(board: Board, title: str, now: float) -> list[str]:
    """The lines drawn for `board` (plain text, escaped)."""
    states = board.snapshot()
    busy = [s for s in states if s.active]
    done = sum(s.kind in ("done", "not-started") for s in states)
    waiting = sum(s.kind == "waiting" for s in states)
    head = f"{title}: {done}/{len(states)} hosts done, {len(busy)} in flight"
    head += f", {waiting} waiting" if waiting else ""
    width = max((len(printable(s.host)) for s in busy[:SHOWN]), default=0)
    lines = [head] + [f"  {printable(s.host):<{width}}  {describe(s, now)}" for s in busy[:SHOWN]]
    if len(busy) > SHOWN:
        lines.append(f"  ... and {len(busy) - SHOWN} more")
    return lines


class Display:
    """Draws the board while a phase runs (`phase`), and prints lines above it (`say`)."""

    def __init__(self, board: Board, enabled: bool) -> None:
        self.board = board
        self.enabled = enabled
        self.live: Any = None
        self.title = ""

    @contextlib.contextmanager
    def phase(self, title: str, hosts: Iterable[str]) -> Iterator[None]:
        self.board.reset(hosts)
        if not self.enabled:
            yield
            return
        self.title = title
        with Live(get_renderable=self._render, console=console(stderr=True),
                  refresh_per_second=8, transient=True,
                  redirect_stdout=False, redirect_stderr=False) as live:
            self.live = live
            try:
                yield
            finally:
                self.live = None

    def _render(self) -> RenderableType:
        return Text("\n".join(render_lines(self.board, self.title, time.monotonic())))

    def say(self, line: str) -> None:
        """One line on stderr (escaped), above the drawing when there is one."""
        live = self.live
        if live is not None:
            live.console.print(Text(printable(line)))
        else:
            echo(line, err=True)

    def leave(self, code: int) -> None:
        """End the process now (the second Ctrl-C): the cursor shown again, no teardown."""
        if self.live is not None:
            with contextlib.suppress(OSError):
                os.write(sys.stderr.fileno(), b"\x1b[?25h\n")
        os._exit(code)
