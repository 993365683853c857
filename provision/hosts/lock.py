"""The host lock: one converge at a time per host. Pure: the scripts, the parse of what the
host says (hostile text: capped, every field checked), the decisions and the messages. The
I/O (the held exec, the heartbeat) lives in `provision.hosts.gather`.

How it holds (templates/host-lock.sh.j2): `apply` wraps its one fact probe in the lock. On
the host, the probe's own process takes `flock` on /run/provision/converge.lock, so the
kernel releases the lock the moment that process dies, and writes who holds it (the
operator as `$USER@hostname` of the control machine, the command, since when, a token).
Before it probes it waits for the commands of an earlier holder that still run and for
rollbacks armed on the host (an operator killed in the commit-confirmed window): facts are
read only once nobody else can change the host. After the probe the process stays, reading
a heartbeat byte from the operator every few seconds; `q` releases, end of input (the SSH
session died) or silence for `LIFELINE` s (the laptop is gone) ends it and marks the
record, so the next taker says what became of its holder. No extra round trip: the
no-op path is still one remote exec, released by one byte.

Every exec that changes the host later in the run starts with the guard
(templates/host-lock-guard.sh.j2): it runs only while the record is this run's and held.

Two runs over several hosts could wait for each other forever (each holds one host the
other wants): `must_yield` is wait-die over the runs' tokens (they start with the run's
start time): a run waits for an older holder only while it holds no other host's lock.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Literal

from provision.frozen import frozen
from provision.render.env import render as _render
from provision.steps.commit import ROLLBACK_UNIT_PREFIX, STATE_DIR
from provision.text import printable

LOCK_DIR = "/run/provision"
LOCK = f"{LOCK_DIR}/converge.lock"
HOLDER = f"{LOCK_DIR}/converge.holder"
WORK = f"{LOCK_DIR}/converge.work"
DEFAULT_TIMEOUT = 180  # --lock-timeout: a few minutes, longer than a confirmation window
GRACE = 1  # s of quiet waiting before saying so (a holder releasing right now)
BEAT = 5.0  # s between heartbeat bytes
LIFELINE = 60  # s of silence after which the host gives the lock up
GUARD_EXIT = 75  # the guard's and the lock's refusal (EX_TEMPFAIL)
RECORD_MAX = 512  # bytes of a holder record (the host caps it too)
LINE_MAX = 1024  # bytes of one lock line
LINES_MAX = 64  # lock lines in one answer

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_BY = re.compile(r"^[A-Za-z0-9._-]{1,64}@[A-Za-z0-9._-]{1,64}$")
_COMMAND = re.compile(r"^[a-z][a-z-]{0,15}$")
_TOKEN = re.compile(r"^[0-9a-f]{12,64}$")
_INT = re.compile(r"^[0-9]{1,12}$")
_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_EPOCH = re.compile(r"^[0-9]{1,12}(\.[0-9]{1,9})?$")
States = Literal["held", "closed", "silent"]
STATES: tuple[States, ...] = ("held", "closed", "silent")


def operator_id(user: str, hostname: str) -> str:
    """`user@host` as recorded on the host; characters outside [A-Za-z0-9._-] become `_`
    (both come from the control machine's environment)."""
    def clean(s: str) -> str:
        return re.sub(r"[^A-Za-z0-9._-]", "_", s)[:64] or "unknown"
    return f"{clean(user)}@{clean(hostname.split('.')[0])}"


def new_token(now: float, random_hex: str) -> str:
    """The run's token: its start in ms (hex, fixed width) then randomness. Tokens order the
    runs for `must_yield` the same way on every host and every control machine."""
    if not re.fullmatch(r"[0-9a-f]{8,32}", random_hex):
        raise ValueError("random_hex: 8-32 lowercase hex digits")
    return f"{int(now * 1000):012x}{random_hex}"


@frozen
class Spec:
    """What an apply asks of each host's lock."""

    by: str
    command: str
    token: str
    timeout: int = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if not _BY.match(self.by) or not _COMMAND.match(self.command) \
                or not _TOKEN.match(self.token) or not 0 <= self.timeout <= 86400:
            raise ValueError(f"bad lock spec {self!r}")


def script(probe: str, spec: Spec | None) -> str:
    """`probe` (a complete probe script) wrapped in the lock: apply mode with `spec`, plan
    mode (never waits, only reports) without."""
    common = {"probe": probe, "lock": LOCK, "holder": HOLDER, "work": WORK,
              "lock_dir": LOCK_DIR, "commit_dir": STATE_DIR,
              "rollback_prefix": ROLLBACK_UNIT_PREFIX}
    if spec is None:
        return _render("host-lock.sh.j2", mode="plan", **common)
    return _render("host-lock.sh.j2", mode="apply", by=spec.by, command=spec.command,
                   token=spec.token, timeout=int(spec.timeout), grace=GRACE,
                   lifeline=LIFELINE, **common)


def guard(token: str, body: str) -> str:
    """`body` (a script for `sh -s`) run only while the run with `token` holds the lock."""
    if not _TOKEN.match(token):
        raise ValueError(f"bad lock token {token!r}")
    return _render("host-lock-guard.sh.j2", work=WORK, holder=HOLDER, token=token) + body


# --- what the host says ------------------------------------------------------------------

@frozen
class Holder:
    """A holder record: who took the lock, with what, since when (host clock), and what
    became of it (held; closed: its session ended without releasing; silent: its heartbeat
    stopped) and when."""

    by: str
    command: str
    since: int
    token: str
    pid: int
    state: States = "held"
    ended: int | None = None


def parse_holder(text: str) -> Holder | None:
    """A record line from the host, or None when it is not one we wrote (unreadable)."""
    if len(text.encode("utf-8", "replace")) > RECORD_MAX or "\n" in text.strip("\n"):
        return None
    f = text.strip("\n").split("\t")
    if len(f) != 9 or f[0] != "provision-lock" or f[1] != "1":
        return None
    _, _, by, command, since, token, pid, state, ended = f
    if not (_BY.match(by) and _COMMAND.match(command) and _INT.match(since)
            and _TOKEN.match(token) and _INT.match(pid) and state in STATES
            and (ended == "-" or _INT.match(ended))):
        return None
    if (state == "held") != (ended == "-"):
        return None
    st: States = "held" if state == "held" else "closed" if state == "closed" else "silent"
    return Holder(by, command, int(since), token, int(pid), st,
                  None if ended == "-" else int(ended))


@frozen
class Armed:
    """A rollback armed on the host by an earlier run: its commit id and when it was armed."""

    id: str
    at: float | None

    @property
    def kind(self) -> str:
        return self.id.split("-", 1)[0]


@frozen
class Flocker:
    """A process holding the lock file's flock, read from /proc/locks on the host: what is
    said when the holder wrote no record (pid, uid, account, command name; host output)."""

    pid: int
    uid: int | None
    account: str
    command: str

    def describe(self) -> str:
        uid = "uid ?" if self.uid is None else f"uid {self.uid}"
        account = "" if self.account == "-" else f" {self.account}"
        return printable(f"pid {self.pid} ({uid}{account}: {self.command})")


def _flocker(fields: list[str]) -> Flocker | None:
    if len(fields) != 4 or not _INT.match(fields[0]) or not (
            fields[1] == "-" or _INT.match(fields[1])):
        return None
    account = fields[2] if fields[2] == "-" or _NAME.match(fields[2]) else "?"
    return Flocker(int(fields[0]), None if fields[1] == "-" else int(fields[1]), account,
                   fields[3][:64] or "-")


Unreadable = Literal["unreadable"]
UNREADABLE: Unreadable = "unreadable"
HolderSeen = Holder | Unreadable | None  # None: no record at all


@dataclass
class Report:
    """Everything the lock said on one host, in order of arrival."""

    busy: HolderSeen = None  # apply: had to wait for this holder
    held: HolderSeen = None  # plan: an apply holds the host now
    stale: HolderSeen = None  # apply: took the lock over from a holder that ended without releasing
    execs: bool = False  # apply: waited for an earlier holder's commands
    armed: list[Armed] = field(default_factory=list)  # apply: waited for; plan: pending now
    orphans: list[Armed] = field(default_factory=list)
    contended: bool = False  # apply: the lock was taken when we came (even for a moment)
    acquired: bool = False
    acquired_at: float | None = None  # host clock
    waited: int = 0
    timeout: str = ""  # held | execs | armed: what the wait ran out on
    timeout_holder: HolderSeen = None
    error: str = ""
    flockers: list[Flocker] = field(default_factory=list)  # who holds the flock, with no record
    malformed: int = 0  # lines that were not a lock record we know (never trusted)
    lines: int = 0

    def to_json(self) -> dict[str, object]:
        def h(x: HolderSeen) -> object:
            if x is None or x == UNREADABLE:
                return x
            assert isinstance(x, Holder)
            return {"by": x.by, "command": x.command, "since": x.since, "state": x.state,
                    "ended": x.ended}
        return {"acquired": self.acquired, "acquired_at": self.acquired_at,
                "contended": self.contended, "waited_seconds": self.waited,
                "waited_for": h(self.busy), "held_by": h(self.held), "took_over": h(self.stale),
                "rollbacks_waited": [a.id for a in self.armed],
                "orphaned_rollbacks": [a.id for a in self.orphans],
                "timeout": self.timeout or None, "error": self.error or None,
                "flock_held_by": [{"pid": f.pid, "uid": f.uid, "account": f.account,
                                   "command": f.command} for f in self.flockers]}


def _seen(rest: str) -> HolderSeen:
    if rest == "":
        return None
    return parse_holder(rest) or UNREADABLE


def _armed(fields: list[str]) -> Armed | None:
    if len(fields) != 2 or not _ID.match(fields[0]) or (fields[1] and not _EPOCH.match(fields[1])):
        return None
    return Armed(fields[0], float(fields[1]) if fields[1] else None)


def split(stdout: str) -> tuple[list[str], str]:
    """(the lock's lines, the probe's answer from its `probe` header on)."""
    lines = stdout.split("\n")
    for n, line in enumerate(lines):
        if not line.startswith("lock\t"):
            return lines[:n], "\n".join(lines[n:])
    return lines, ""


def feed(report: Report, line: str) -> str | None:
    """Add one `lock<TAB>...` line to `report`; the event it was ("busy", "armed", ...) or
    None when it was not a line we know (counted as malformed, never trusted)."""
    report.lines += 1
    if report.lines > LINES_MAX or "\n" in line or len(line.encode("utf-8", "replace")) > LINE_MAX:
        report.malformed += 1
        return None
    f = line.split("\t")
    if f[0] != "lock" or len(f) < 2:
        report.malformed += 1
        return None
    kind, rest = f[1], f[2:]
    joined = "\t".join(rest)
    if kind == "busy":
        report.busy = _seen(joined)
    elif kind == "held":
        report.held = _seen(joined)
    elif kind == "stale":
        report.stale = _seen(joined)
    elif kind == "execs" and not rest:
        report.execs = True
    elif kind in ("armed", "orphan") and (a := _armed(rest)) is not None:
        (report.armed if kind == "armed" else report.orphans).append(a)
    elif kind == "contended" and not rest:
        report.contended = True
    elif kind == "acquired" and len(rest) == 2 and _INT.match(rest[0]) and _EPOCH.match(rest[1]):
        report.acquired, report.waited, report.acquired_at = True, int(rest[0]), float(rest[1])
    elif kind == "timeout" and rest and rest[0] in ("held", "execs", "armed"):
        report.timeout = rest[0]
        report.timeout_holder = _seen("\t".join(rest[1:])) if rest[1:] != ["-"] else None
    elif kind == "flock" and (fl := _flocker(rest)) is not None and len(report.flockers) < 8:
        report.flockers.append(fl)
    elif kind == "error" and len(rest) == 1 and rest[0]:
        report.error = rest[0][:200]
    else:
        report.malformed += 1
        return None
    return kind


def parse(lines: list[str]) -> Report:
    report = Report()
    for line in lines:
        feed(report, line)
    return report


# --- decisions ---------------------------------------------------------------------------

def must_yield(mine: str, holder: HolderSeen) -> bool:
    """Wait-die: True when this run (token `mine`) waits for an OLDER run, and so must hold no
    other host's lock while it waits. An unreadable or missing record: yield (safe side)."""
    if not isinstance(holder, Holder):
        return True
    return holder.token < mine


def staleness(h: Holder, now: float) -> str:
    """Why the lock of `h` was free although its record was still there. Provably stale:
    the kernel had released the flock, so the process that held it is gone."""
    ended = clock(h.ended, now) if h.ended is not None else "?"
    if h.state == "closed":
        return f"its SSH session ended at {ended} without releasing it"
    if h.state == "silent":
        return f"its heartbeat stopped (no byte for {LIFELINE} s) at {ended}"
    return "its process on the host died without releasing it (killed, or the host restarted)"


# --- messages (every string from the host goes through `printable`) ---------------------

def clock(epoch: float, now: float) -> str:
    """`12:01:05` local time, with the date when it is not today."""
    t, n = time.localtime(epoch), time.localtime(now)
    if (t.tm_year, t.tm_yday) == (n.tm_year, n.tm_yday):
        return time.strftime("%H:%M:%S", t)
    return time.strftime("%Y-%m-%d %H:%M:%S", t)


def who(h: HolderSeen, now: float, flockers: list[Flocker] | None = None) -> str:
    """`apply by alice@laptop since 12:01:05`; with no record, the processes holding the
    lock file's flock when the host named them."""
    if h is None and flockers:
        return "a process that left no record: " + ", ".join(f.describe() for f in flockers)
    if h is None:
        return "a run that left no record"
    if not isinstance(h, Holder):
        return "a run whose lock record is unreadable"
    return printable(f"{h.command} by {h.by} since {clock(h.since, now)}")


def took_over(h: HolderSeen, now: float) -> str:
    if not isinstance(h, Holder):
        return f"took over the host lock from {who(h, now)}"
    return f"took over a stale lock from {who(h, now)}: {staleness(h, now)}"


def event_text(report: Report, event: str, now: float) -> str | None:
    """The line to print (after `host: `) when `event` arrives, or None."""
    if event == "busy":
        return f"waiting for {who(report.busy, now, report.flockers)}"
    if event == "stale":
        return took_over(report.stale, now)
    if event == "execs":
        return "waiting for commands of the previous holder still running on the host"
    if event == "armed":
        a = report.armed[-1]
        at = f" armed at {clock(a.at, now)}" if a.at is not None else ""
        return (f"waiting for the host's own rollback of {printable(a.kind)}{at} "
                f"({printable(a.id)}) to run or be confirmed")
    if event == "yield":
        return ("let go of this host's lock while another host of this run waits for an "
                "older run; probing it again after")
    if event == "orphan":
        a = report.orphans[-1]
        return (f"rollback {printable(a.id)} was armed but its timer is gone (the host "
                "restarted?): set aside, this run plans from what the host has now")
    return None


def failure(report: Report, timeout: int, now: float) -> str | None:
    """The host's failure when the lock was not taken (apply), else None."""
    if report.error:
        return f"host lock: {printable(report.error)}"
    if report.timeout == "held":
        return (f"host lock held by {who(report.timeout_holder or report.busy, now, report.flockers)}; "
                f"gave up after {timeout} s (--lock-timeout)")
    if report.timeout == "execs":
        return (f"commands of the previous holder still run on the host after {timeout} s "
                "(--lock-timeout); nothing done")
    if report.timeout == "armed":
        ids = ", ".join(printable(a.id) for a in report.armed) or "?"
        return (f"a rollback armed on the host ({ids}) had not run after {timeout} s "
                "(--lock-timeout); nothing done")
    if not report.acquired:
        return "host lock: the host did not say it took the lock"
    return None


def note(report: Report, now: float, plan: bool) -> str:
    """The recap's note: what the lock did (apply) or what holds the host (plan)."""
    parts: list[str] = []
    if plan:
        if report.held is not None or report.flockers:
            parts.append(f"{who(report.held, now, report.flockers)} holds the host: this plan "
                         "may be out of date when it finishes")
        if report.stale is not None:
            h = report.stale
            why = f": {staleness(h, now)}" if isinstance(h, Holder) else ""
            parts.append(f"the lock of {who(h, now)} was never released{why}; the next apply "
                         "takes it over")
        if report.armed:
            parts.append("a rollback is armed on the host (" + ", ".join(
                printable(a.id) for a in report.armed) + "): the host changes when it fires")
        return "; ".join(parts)
    if report.stale is not None:
        parts.append(took_over(report.stale, now))
    if report.busy is not None or report.armed or report.execs:
        what = [w for w, on in (("the previous holder", report.busy is not None or report.execs),
                                ("its rollback", bool(report.armed))) if on]
        parts.append(f"waited {report.waited} s for {' and '.join(what)}; planned from facts "
                     "read after")
    if report.orphans:
        parts.append("set aside orphaned rollback(s) " + ", ".join(printable(a.id)
                                                                   for a in report.orphans))
    return "; ".join(parts)
