"""Where each host of a converge stands, as a pure model fed by events (functional core).

The shell (`provision.hosts.converge`, `.confirm`) says what a host is doing as it happens
(`Event`); `Board` keeps one `HostState` per host. What the terminal shows
(`provision.commands.live`), what the first Ctrl-C says ("stopping: 2 hosts finishing, 3
not started") and what the second says a host may have left half-way are all read from
the board here, so they are tested with plain event lists, no SSH and no terminal.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from provision.text import printable

# The states a host passes through, in order. "waiting": not started yet; "done": finished
# (its recap status in `status`); "not-started": the run was stopped before it began.
ACTIVE = ("connecting", "probing", "lock-wait", "applying", "dpkg-lock", "confirming")
KINDS = ("waiting", *ACTIVE, "step", "done", "not-started")
NOT_STARTED = "not-started"  # a host's recap status when Ctrl-C came before its turn


@dataclass(frozen=True)
class Event:
    """One thing a host started doing. `detail`: words from the shell (a lock's holder, the
    action being run); `step`/`steps`: the batch's progress; `until`: when a confirmation
    window ends (same clock as the `now` the board is read with)."""

    host: str
    kind: str
    detail: str = ""
    step: int = -1
    steps: int = 0
    until: float = 0.0
    status: str = ""
    armed: bool = False  # `applying`: the batch carries commit-confirmed changes

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown progress event {self.kind!r}")


@dataclass(frozen=True)
class HostState:
    host: str
    kind: str = "waiting"
    detail: str = ""
    step: int = -1
    steps: int = 0
    until: float = 0.0
    status: str = ""
    armed: bool = False  # a commit-confirmed change went to the host in this run

    @property
    def active(self) -> bool:
        return self.kind in ACTIVE


def advance(state: HostState, e: Event) -> HostState:
    """The host's state after `e` (pure). A `step` keeps the host applying and moves its
    step; a finished host stays finished whatever comes late."""
    if state.kind in ("done", "not-started"):
        return state
    if e.kind == "step":
        return dataclasses.replace(state, kind="applying", step=e.step,
                                   steps=e.steps or state.steps, detail=e.detail)
    if e.kind == "applying":
        return dataclasses.replace(state, kind="applying", steps=e.steps, step=-1,
                                   detail=e.detail, armed=state.armed or e.armed)
    if e.kind == "dpkg-lock":  # the step stays; the wait is said on top of it
        return dataclasses.replace(state, kind="dpkg-lock", detail=e.detail)
    if e.kind == "confirming":
        return dataclasses.replace(state, kind="confirming", until=e.until, armed=True)
    return dataclasses.replace(state, kind=e.kind, detail=e.detail, status=e.status)


def describe(s: HostState, now: float) -> str:
    """What the host is doing, in words (one line; outside text escaped)."""
    d = printable(s.detail)
    if s.kind == "waiting":
        return "waiting for its turn"
    if s.kind == "connecting":
        return "connecting"
    if s.kind == "probing":
        return "probing (taking the host lock, reading facts)"
    if s.kind == "lock-wait":
        return d or "waiting for the host lock"
    if s.kind == "applying":
        if s.step < 0:
            return f"sending {s.steps} action(s)" if s.steps else "applying"
        at = f"step {s.step + 1} of {s.steps}" if s.steps else f"step {s.step + 1}"
        return f"running the batch, {at}" + (f": {d}" if d else "")
    if s.kind == "dpkg-lock":
        return f"waiting for the dpkg lock (held by {d})" if d else "waiting for the dpkg lock"
    if s.kind == "confirming":
        left = max(0, int(s.until - now + 0.999))
        return f"confirming over a new login (rollback in {left} s)"
    if s.kind == "not-started":
        return "not started"
    return printable(s.status) or "done"


def halfway(s: HostState, now: float) -> str:
    """What a host may have left half-way if the run ends now (the second Ctrl-C), and what
    covers it on the host."""
    if s.kind in ("connecting", "probing", "lock-wait"):
        return "nothing changed there yet (its host lock ends with the connection)"
    if s.kind == "confirming":
        left = max(0, int(s.until - now + 0.999))
        return ("its sshd/firewall change is armed and not confirmed: the host rolls it back "
                f"by its own timer (in about {left} s)")
    at = f" at step {s.step + 1} of {s.steps}" if s.step >= 0 and s.steps else ""
    text = (f"its batch may stop{at}: each file is written to a temp file and renamed, so "
            "every file is whole, old or new; the next apply removes the temp files and "
            "finishes the rest")
    if s.armed:
        text += "; an sshd/firewall change armed there rolls back by the host's own timer"
    return text


class Board:
    """Every host's state; fed from the hosts' threads, read by the display and the Ctrl-C
    handler (one lock; each method is short)."""

    def __init__(self, hosts: Iterable[str] = ()) -> None:
        self.mutex = threading.Lock()
        self.states: dict[str, HostState] = {h: HostState(h) for h in hosts}

    def reset(self, hosts: Iterable[str]) -> None:
        """A new phase over `hosts` (e.g. the apply after the plan): each waits again."""
        with self.mutex:
            self.states = {h: HostState(h) for h in hosts}

    def feed(self, e: Event) -> None:
        with self.mutex:
            old = self.states.get(e.host)
            if old is None:
                return
            self.states[e.host] = advance(old, e)

    def snapshot(self) -> list[HostState]:
        with self.mutex:
            return list(self.states.values())


def stopping_line(states: Iterable[HostState], now: float) -> str:
    """What the first Ctrl-C says at once: how many hosts finish (which, doing what: five
    at most) and how many will not start."""
    states = list(states)
    busy = [s for s in states if s.active]
    waiting = sum(s.kind == "waiting" for s in states)
    which = "; ".join(f"{printable(s.host)}: {describe(s, now)}" for s in busy[:5])
    which += f"; and {len(busy) - 5} more" if len(busy) > 5 else ""
    return (f"stopping: {len(busy)} host{'s' if len(busy) != 1 else ''} finishing"
            + (f" ({which})" if which else "")
            + f", {waiting} not started (Ctrl-C again to leave at once)")


def leaving_lines(states: Iterable[HostState], now: float) -> list[str]:
    """What the second Ctrl-C says before the process ends: per host in flight, what may be
    half-way and what covers it."""
    busy = [s for s in states if s.active]
    if not busy:
        return ["leaving now: no host was being worked on"]
    return ["leaving now; what may be half-way:"] + [
        f"  {printable(s.host)} ({describe(s, now)}): {halfway(s, now)}" for s in busy]


def from_batch_line(host: str, line: str, steps: list[str]) -> Event | None:
    """An event from one stdout line of a batch (`provision.steps.script`: `@step N`, and
    the apt library's `@wait dpkg-lock HOLDER`); `steps` describes the batch's actions.
    Anything else (or malformed: the host's output is outside text) is None."""
    tag, _, rest = line.partition("\t")
    if tag == "@step" and rest.isdigit():
        i = int(rest)
        return Event(host, "step", step=i, steps=len(steps),
                     detail=steps[i] if i < len(steps) else "")
    if tag == "@wait":
        what, _, holder = rest.partition("\t")
        if what == "dpkg-lock":
            return Event(host, "dpkg-lock", detail=holder[:200])
    return None
