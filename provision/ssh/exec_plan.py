"""`provision exec`: the decisions (pure). What runs on the host, how to stop it, how much
output is kept, what each host's result is called, and the lines printed for it.

The remote command first prints the process id of the shell sshd started for the session on
a line of its own (sshd makes that shell a session and process-group leader, so its pid is
the group of everything the command starts, sudo and its child included); the runner reads
that line off stdout before the command's own output. Stopping a host's command (Ctrl-C,
--timeout) is `kill -TERM -- -PGID` over a new session on the same connection, behind
`sudo -n` when the command ran under sudo: closing the channel alone leaves a command without
a terminal running on the host.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Literal

from provision.record import record

Status = Literal["ok", "failed", "unreachable", "timeout", "interrupted"]
DEFAULT_CAP = 1024 * 1024  # bytes kept per host and stream
PGID_LINE = re.compile(rb"^(\d{1,10})\n")
MAX_PGID_PREFIX = 12  # the pid line is at most this long


def remote_command(command: str, sudo: bool) -> str:
    """The exec request for `command` (a shell string, as `ssh host CMD` takes it): the
    session's pid on the first stdout line, then the command, under `sudo -n` when asked."""
    run = f"sudo -n -- sh -c {shlex.quote(command)}" if sudo else command
    return f"echo $$; {run}"


def kill_command(pgid: int, sudo: bool, signal: str = "TERM") -> str:
    """Stop every process of the command's group (its shell, sudo, what they started)."""
    kill = f"kill -{signal} -- -{pgid}"
    return f"sudo -n {kill}" if sudo else kill


def split_pgid(head: bytes) -> tuple[int | None, bytes]:
    """(pgid, the rest) once the first stdout line is complete; (None, head) while it is not
    (and more could still make it one)."""
    m = PGID_LINE.match(head)
    if m:
        return int(m.group(1)), head[m.end():]
    return None, head


@dataclass
class Capped:
    """The first `cap` bytes of a stream; the rest is counted, not kept (reading goes on, so
    the remote command is never stalled by a full window)."""

    cap: int
    kept: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap - len(self.kept)
        if room > 0:
            self.kept += data[:room]

    @property
    def cut(self) -> bool:
        return self.total > len(self.kept)

    def text(self) -> str:
        return self.kept.decode("utf-8", "replace")


@record
class Result:
    """One host's answer."""

    host: str
    status: Status
    exit_status: int | None
    seconds: float
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stdout_cut: bool = False
    stderr_cut: bool = False
    error: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"host": self.host, "status": self.status, "exit_status": self.exit_status,
                "seconds": round(self.seconds, 3), "stdout": self.stdout, "stderr": self.stderr,
                "stdout_bytes": self.stdout_bytes, "stderr_bytes": self.stderr_bytes,
                "stdout_truncated": self.stdout_cut, "stderr_truncated": self.stderr_cut,
                "error": self.error}

    def note(self, cap: int) -> str:
        """The recap's last column: why it failed, what was cut."""
        parts = [self.error] if self.error else []
        if self.stdout_cut:
            parts.append(f"stdout cut at {cap} of {self.stdout_bytes} bytes")
        if self.stderr_cut:
            parts.append(f"stderr cut at {cap} of {self.stderr_bytes} bytes")
        return "; ".join(parts)


def status_of(exit_status: int | None, timed_out: bool, interrupted: bool) -> Status:
    if interrupted:
        return "interrupted"
    if timed_out:
        return "timeout"
    return "ok" if exit_status == 0 else "failed"


def exit_code(results: list[Result]) -> int:
    """0 when every host ran the command and it exited 0; else 1."""
    return 0 if results and all(r.status == "ok" for r in results) else 1


def cut_note(name: str, total: int, cap: int) -> str:
    return f"[{name} cut at {cap} bytes: {total} bytes in all]"


def prefixed(host: str, text: str, width: int, stream: Literal["out", "err"]) -> list[str]:
    """`--stream` lines: `host | line` for stdout, `host ! line` for stderr, names padded
    to `width` so the columns line up."""
    mark = "|" if stream == "out" else "!"
    return [f"{host:<{width}} {mark} {line}" for line in text.splitlines()]


def summary(results: list[Result]) -> str:
    by: dict[str, int] = {}
    for r in results:
        by[r.status] = by.get(r.status, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(by.items()))
