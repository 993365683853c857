"""A provision CLI process run through tests/support/faults.py, for the Ctrl-C tests: its
stderr read line by line as it comes, so a test waits for what the process says (or for a
hold point of `--hold-dir`) instead of sleeping."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

FAULTS = Path(__file__).with_name("faults.py")
ROOT = FAULTS.parents[2]
WAIT = 120.0


class Proc:
    """`faults.py ARGS` (or `cmd` as given: the lab's wraps it in `ip netns exec`)."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None,
                 cmd: list[str] | None = None) -> None:
        self.p = subprocess.Popen(cmd or [sys.executable, str(FAULTS), *args], cwd=ROOT,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, **(env or {})})
        self.wait = WAIT  # the longest any awaited line or mark may take
        self.lines: list[str] = []
        self.out: list[str] = []
        self.changed = threading.Condition()
        self.readers = [threading.Thread(target=f, daemon=True)
                        for f in (self._read_err, self._read_out)]
        for t in self.readers:
            t.start()

    def _read_err(self) -> None:
        assert self.p.stderr is not None
        for line in self.p.stderr:
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
        with self.changed:
            self.lines.append("")  # end of stderr
            self.changed.notify_all()

    def _read_out(self) -> None:
        assert self.p.stdout is not None
        self.out.append(self.p.stdout.read())

    def said(self, text: str, timeout: float | None = None) -> str:
        """The first stderr line containing `text`, waiting for it; fails if the process
        ends (or `timeout` passes) without it."""
        deadline = time.monotonic() + (timeout or self.wait)
        with self.changed:
            while True:
                for line in self.lines:
                    if text in line:
                        return line
                if self.lines and self.lines[-1] == "":
                    raise AssertionError(f"ended without saying {text!r}:\n" + "".join(self.lines))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{text!r} not said:\n" + "".join(self.lines))
                self.changed.wait(left)

    def reach(self, mark: Path, timeout: float | None = None) -> None:
        """Wait until the process is held at `mark` (a `NAME.reached` file of --hold-dir)."""
        deadline = time.monotonic() + (timeout or self.wait)
        while not mark.exists():
            if self.p.poll() is not None:
                self.finish()
                raise AssertionError(f"ended before {mark.name}:\n" + "".join(self.lines))
            assert time.monotonic() < deadline, f"{mark.name} not reached:\n" + "".join(self.lines)
            time.sleep(0.02)

    def interrupt(self) -> None:
        os.kill(self.p.pid, signal.SIGINT)

    def finish(self, timeout: float | None = None) -> tuple[int, str, str]:
        """Exit status, stderr, stdout."""
        code = self.p.wait(timeout=timeout or self.wait)
        for t in self.readers:
            t.join(10)
        return code, "".join(self.lines), "".join(self.out)

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
