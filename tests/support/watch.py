"""A running CLI process watched from threads: stderr line by line (an event set once a
line says the awaited text), stdout whole (its --json), so a lab test moves the host on
when the run has said it reached a state, however long that took on a busy machine."""

from __future__ import annotations

import json
import subprocess
import threading
from typing import Any


class Watch:
    def __init__(self, p: subprocess.Popen[str], said: str) -> None:
        self.p, self.text = p, said
        self.lines: list[str] = []
        self.out: list[str] = []
        self.said = threading.Event()
        self.readers = [threading.Thread(target=f, daemon=True)
                        for f in (self._read_err, self._read_out)]
        for t in self.readers:
            t.start()

    def _read_err(self) -> None:
        assert self.p.stderr is not None
        for line in self.p.stderr:
            self.lines.append(line)
            if self.text in line:
                self.said.set()

    def _read_out(self) -> None:
        assert self.p.stdout is not None
        self.out.append(self.p.stdout.read())

    def join(self) -> None:
        for t in self.readers:
            t.join(timeout=30)

    def result(self) -> tuple[int, dict[str, Any], str]:
        """(exit status, its --json, its stderr) once the readers are done."""
        try:
            data = json.loads("".join(self.out))
        except json.JSONDecodeError:
            data = {}
        return self.p.returncode, data, "".join(self.lines)
