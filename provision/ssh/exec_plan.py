"""`provision exec`: the decisions (pure). What runs on the host, how to stop it, how much
output is kept, what each host's result is called, and the lines printed for it.

Stopping a host's command (Ctrl-C, --timeout) is `kill -TERM` to its process group over a
new session on the same connection (`sudo -n` when the command ran under sudo): closing the
channel alone leaves a command without a terminal running on the host. Which group that is
never comes from what the host prints on its own: a login shell's rc file, a ForceCommand,
a motd-like banner all print on the same stdout, before the command. So:

- the session shell `exec`s `env PROVISION_EXEC=NONCE sh`, which prints a marker of
  provision's own, `provision-exec-NONCE PID` (NONCE random per run, PID the session
  shell's, kept through every exec: sshd makes that shell a session and process-group
  leader, so its pid is the group of everything the command starts, sudo and its child
  included), then `exec`s the command (the login shell again, or `sudo -n -- env
  PROVISION_EXEC=NONCE sh -c`). The group's leader carries the nonce in
  `/proc/PGID/environ` from before the marker is printed, and so does what it starts. Only a line ending in exactly the marker counts (`Marker`); everything before it
  is the host's output and is kept as output;
- the stop command checks on the host, before it signals, that the group's leader (or,
  once it is gone, a member) carries this run's nonce, and never signals group 0, 1 or its
  own (`STOP_SCRIPT`);
- what came of the stop (`Stop`) is said in the recap and the JSON: `stopped`, `ended` (it
  ended on its own, nothing was signalled) or `not stopped` with the reason.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Literal

from provision.frozen import frozen

Status = Literal["ok", "failed", "unreachable", "timeout", "interrupted"]
StopOutcome = Literal["stopped", "ended", "not stopped"]
DEFAULT_CAP = 1024 * 1024  # bytes kept per host and stream
MARK_TAG = "provision-exec-"  # the marker line: MARK_TAG + NONCE + " " + PID
MARK_ENV = "PROVISION_EXEC"  # in the environment of the group's leader: NONCE
MAX_PID_DIGITS = 10
NONCE = re.compile(r"[0-9a-f]{16,64}")


def remote_command(command: str, sudo: bool, nonce: str) -> str:
    """The exec request for `command` (a shell string, as `ssh host CMD` takes it). The
    session shell becomes, keeping its pid, `env PROVISION_EXEC=NONCE sh`, which prints this
    run's marker with that pid (so the mark is in the group leader's environ before the
    marker can be read), then becomes the command: the login shell again (`$SHELL -c`, as
    sshd ran it) or, asked to, `sudo -n -- env PROVISION_EXEC=NONCE sh -c`. The login shell
    itself reads only `exec`, plain words and single quotes."""
    _check_nonce(nonce)
    mark = 'printf "%s %s\\n" "$0" "$$"'
    if sudo:  # sudo resets the environment: the mark is given again, for root's processes
        run = (f"'{mark}; exec \"$@\"' {MARK_TAG}{nonce} "
               f"sudo -n -- env {MARK_ENV}={nonce} sh -c {shlex.quote(command)}")
    else:
        run = (f"'{mark}; exec \"${{SHELL:-/bin/sh}}\" -c \"$1\"' {MARK_TAG}{nonce} "
               f"{shlex.quote(command)}")
    return f"exec env {MARK_ENV}={nonce} sh -c {run}"


# Run by `sh -c STOP_SCRIPT provision-stop PGID NONCE` on the host (as root under sudo).
# Exit 0: signalled; 3: refused (why on stderr); 4: no such group (it ended on its own);
# 5: kill failed (why on stderr). A process's state and group are the 3rd and 5th fields of
# /proc/PID/stat, after the command name in parentheses (which may itself hold ") "); a
# zombie (state Z) is no longer a member: it cannot be signalled and has no environ. The
# scan reads each stat with the shell's own `read`: a fork per process took seconds on a
# busy host with thousands of them, past the wait for the stop command's answer. A process
# in the middle of an exec (the session's shell becoming the command) reads as an empty
# environ for a moment (its new memory is there, its environment not yet): `ours` reads
# again, up to a second, instead of calling the run's own group someone else's.
STOP_SCRIPT = """\
p=$1 n=$2
grp() { { read -r s <"/proc/$1/stat"; } 2>/dev/null || return 1; s=${s##*) }; set -- $s; [ "$1" != Z ] && [ "$3" = "$p" ]; }
ours() { i=0; while e=$( { tr '\\0' '\\n' <"/proc/$1/environ"; } 2>/dev/null ) && [ -z "$e" ] && [ $i -lt 20 ]; do i=$((i + 1)); sleep 0.05; done; printf '%s\\n' "$e" | grep -qxF "PROVISION_EXEC=$n"; }
members() { for d in /proc/[0-9]*; do grp "${d#/proc/}" && echo "${d#/proc/}"; done; }
case $p in ''|*[!0-9]*|0|1) echo "process group '$p' is never signalled" >&2; exit 3;; esac
if grp $$; then echo "process group $p is the stop command's own" >&2; exit 3; fi
if grp "$p"; then
  ours "$p" || { echo "process group $p is not this run's (its leader lacks the run's mark)" >&2; exit 3; }
else
  m=$(members); [ -n "$m" ] || exit 4
  o=; for q in $m; do ours "$q" && { o=1; break; }; done
  [ -n "$o" ] || { echo "process group $p is not this run's (no member has the run's mark)" >&2; exit 3; }
fi
kill -TERM "-$p" && exit 0
[ -n "$(members)" ] || exit 4
exit 5
"""


def stop_command(pgid: int, nonce: str, sudo: bool) -> str:
    """Stop every process of the command's group (its shell or sudo, what they started),
    once the host has checked that the group is this run's (`STOP_SCRIPT`)."""
    _check_nonce(nonce)
    run = f"sh -c {shlex.quote(STOP_SCRIPT)} provision-stop {int(pgid)} {nonce}"
    return f"sudo -n {run}" if sudo else run


def _check_nonce(nonce: str) -> None:
    if not NONCE.fullmatch(nonce):  # it goes into shell text unquoted
        raise ValueError(f"not a nonce: {nonce!r}")


class Marker:
    """This run's marker in the first stdout bytes: `provision-exec-NONCE PID` ending a
    line. What comes before it (a login shell's rc file, a ForceCommand's banner, on its own
    lines or on the marker's) is output; so is everything after it; a marker-like line
    after the first one too. `feed` gives back every byte but the marker's, holding back
    only a tail that could still become the marker."""

    def __init__(self, nonce: str) -> None:
        _check_nonce(nonce)
        self.tag = f"{MARK_TAG}{nonce} ".encode()
        self._line = re.compile(re.escape(self.tag) + rb"([0-9]{1,%d})\n" % MAX_PID_DIGITS)
        self._pending = b""
        self.seen = False
        self.pgid: int | None = None

    def feed(self, data: bytes) -> bytes:
        if self.seen:
            return data
        buf = self._pending + data
        m = self._line.search(buf)
        if m:
            self.seen, self.pgid, self._pending = True, int(m.group(1)), b""
            return buf[:m.start()] + buf[m.end():]
        k = self._could_start(buf)
        self._pending = buf[k:]
        return buf[:k]

    def end(self) -> bytes:
        """What was held back, once the stream has ended without completing the marker."""
        rest, self._pending = self._pending, b""
        return rest

    def _could_start(self, buf: bytes) -> int:
        """The first offset from which `buf` could still grow into the marker."""
        longest = len(self.tag) + MAX_PID_DIGITS
        for k in range(max(0, len(buf) - longest), len(buf)):
            tail = buf[k:]
            if (self.tag.startswith(tail) if len(tail) <= len(self.tag)
                    else tail.startswith(self.tag) and tail[len(self.tag):].isdigit()):
                return k
        return len(buf)


@frozen
class Stop:
    """What came of stopping a host's command: `stopped` (its group was signalled), `ended`
    (it had ended on its own: nothing was signalled), `not stopped` (`reason` says why)."""

    outcome: StopOutcome
    reason: str = ""


NO_MARKER = ("the host never printed this run's process-group marker (a ForceCommand, or a "
             "login shell that did not run the command as given?)")


def stop_refusal(pgid: int | None) -> str | None:
    """Why the group the marker named is not signalled at all (None: ask the host)."""
    if pgid is None:
        return NO_MARKER
    if pgid <= 1:
        return f"the host named process group {pgid}, which is never signalled"
    return None


def stop_outcome(status: int | None, stderr: str) -> Stop:
    """The stop command's answer (`STOP_SCRIPT`'s exit status and stderr) as a `Stop`."""
    why = " ".join(stderr.split())
    if status == 0:
        return Stop("stopped")
    if status == 4:
        return Stop("ended")
    if status is None:
        return Stop("not stopped", "no answer from the host to the stop command")
    if status == 3:
        return Stop("not stopped", f"the host refused: {why}")
    if status == 5:
        return Stop("not stopped", f"kill failed: {why}")
    return Stop("not stopped", f"the stop command exited {status}" + (f": {why}" if why else ""))


def stop_note(why: str, stop: Stop | None) -> str:
    """The recap's note for a host whose command was to be stopped (`why`: "timed out",
    "interrupted")."""
    if stop is None or stop.outcome == "stopped":
        return f"{why}: stopped"
    if stop.outcome == "ended":
        return f"{why}, but it had ended on its own" + (
            f"; {stop.reason}" if stop.reason else ": nothing was signalled")
    return f"{why}: not stopped: {stop.reason}; it may still be running on the host"


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


@frozen
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
    stop: StopOutcome | None = None  # None: no stop was asked for

    def as_dict(self) -> dict[str, object]:
        return {"host": self.host, "status": self.status, "exit_status": self.exit_status,
                "seconds": round(self.seconds, 3), "stdout": self.stdout, "stderr": self.stderr,
                "stdout_bytes": self.stdout_bytes, "stderr_bytes": self.stderr_bytes,
                "stdout_truncated": self.stdout_cut, "stderr_truncated": self.stderr_cut,
                "error": self.error, "stop": self.stop}

    def note(self, cap: int) -> str:
        """The recap's last column: why it failed, what was cut."""
        parts = [self.error] if self.error else []
        if self.stdout_cut:
            parts.append(f"stdout cut at {cap} of {self.stdout_bytes} bytes")
        if self.stderr_cut:
            parts.append(f"stderr cut at {cap} of {self.stderr_bytes} bytes")
        return "; ".join(parts)


def status_of(exit_status: int | None, timed_out: bool, interrupted: bool,
              stop: Stop | None = None) -> Status:
    """`timeout` or `interrupted` only for a command that was still running when the stop
    came; one that had ended on its own (`Stop("ended")`) is `ok` or `failed` by its exit
    status, whenever the stop came."""
    ended = stop is not None and stop.outcome == "ended"
    if interrupted and not ended:
        return "interrupted"
    if timed_out and not ended:
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
