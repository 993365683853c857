"""The shell step: `- run: CMD` in a playbook, with `creates:` / `unless:` guards. Pure.

Like Ansible's command module with Puppet's `unless`: the command runs when every guard
says "not done" (the `creates` path is absent, the `unless` command exits non-zero), and is
skipped as soon as one says "done". Both guards are evaluated inside the host's one probe
(`provision.facts.guards`), so a converged host still costs one remote exec. A step
without a guard runs on every apply: it is never "no changes".

After the command, the batch checks its guards again (`templates/steps/run.sh`): a command
that succeeds without creating its `creates` path, or after which `unless` still fails,
fails the step, because the next plan would run it again.
"""

from __future__ import annotations

import functools
import hashlib
from importlib.resources import files
from shlex import quote

from provision.facts import Facts, FactsError, Request
from provision.facts import guards as G
from provision.frozen import frozen
from provision.inventory.model import Host, Inventory

from .action import Action, Lib


@functools.cache
def _run_lib() -> str:
    return (files("provision._templates") / "steps" / "run.sh").read_text("utf-8")


RUN = Lib(30, "run", _run_lib)  # `provision_run`: the library `RunCommand` calls


@frozen
class ShellSpec:
    """One `run:` entry of a playbook, as validated by `provision.playbook`."""

    label: str  # the step's name in plans and recaps
    command: str
    creates: str | None = None
    unless: str | None = None
    sudo: bool = True  # False: as the login user (a login shell), not root
    where: str = ""  # file:line:col of the entry


@frozen
class Decision:
    """Whether a guarded step would run, and why (plan prints it, --json lists it)."""

    step: str
    run: bool
    why: str

    def to_json(self) -> dict[str, object]:
        return {"step": self.step, "run": self.run, "why": self.why}


@frozen
class RunCommand(Action):
    """Run `command` with `sh -c` (as `user` through a login shell, or root when None),
    then check that its guards now say done."""

    command: str
    user: str | None
    creates: str | None
    unless: str | None
    why: str

    libs = (RUN,)

    def script(self) -> str:
        return " ".join(["provision_run", *(quote(x or "") for x in
                                            (self.user, self.creates, self.unless, self.command))])

    def describe(self) -> str:
        return f"run {_short(self.command)}{' as ' + self.user if self.user else ''} ({self.why})"


def _short(command: str, most: int = 60) -> str:
    one = " ".join(command.split())
    return repr(one if len(one) <= most else one[: most - 1] + "…")


def guard_id(kind: str, user: str, value: str) -> str:
    """The id of a guard in the probe: the same guard asked twice runs once."""
    return hashlib.sha256(f"{kind}\0{user}\0{value}".encode()).hexdigest()[:16]


def guard_user(spec: ShellSpec, host: Host) -> str:
    """Who runs the step: "" for root (the probe and the batch run as root)."""
    return "" if spec.sudo or host.user == "root" else host.user


def decide(label: str, creates: str | None, unless: str | None,
           creates_status: int | None, unless_status: int | None) -> Decision:
    """Run unless a guard says done: `creates` exists (status 0) or `unless` exits 0.
    The statuses are the probe's (None: that guard was not asked)."""
    if creates is None and unless is None:
        return Decision(label, True, "no creates/unless guard: runs on every apply")
    if creates is not None and creates_status == 0:
        return Decision(label, False, f"{creates} exists")
    if unless is not None and unless_status == 0:
        return Decision(label, False, f"unless {_short(unless)} exited 0")
    why = []
    if creates is not None:
        why.append(f"{creates} is absent")
    if unless is not None:
        status = (f"timed out after {G.GUARD_TIMEOUT} s" if unless_status == 124
                  else f"exited {unless_status}")
        why.append(f"unless {_short(unless)} {status}")
    return Decision(label, True, ", ".join(why))


@frozen
class ShellStep:
    spec: ShellSpec
    host: Host

    @property
    def name(self) -> str:
        return self.spec.label

    def _guards(self) -> list[tuple[str, str, str]]:
        user = guard_user(self.spec, self.host)
        out = []
        if self.spec.creates is not None:
            out.append(("c", "", self.spec.creates))  # existence is checked as root
        if self.spec.unless is not None:
            out.append(("u", user, self.spec.unless))
        return out

    def request(self) -> Request:
        return Request(guards=tuple(f"G:{guard_id(k, u, v)}:{k}:{u}:{v}"
                                    for k, u, v in self._guards()))

    def decision(self, facts: Facts) -> Decision:
        answers = facts.get(G.SPEC)
        status: dict[str, int | None] = {"c": None, "u": None}
        for kind, user, value in self._guards():
            gid = guard_id(kind, user, value)
            if gid not in answers:
                raise FactsError(f"step {self.name}: the probe did not answer its "
                                 f"{'creates' if kind == 'c' else 'unless'} guard")
            status[kind] = answers[gid]
        return decide(self.name, self.spec.creates, self.spec.unless, status["c"], status["u"])

    def diff(self, facts: Facts) -> list[RunCommand]:
        d = self.decision(facts)
        if not d.run:
            return []
        return [RunCommand(self.spec.command, guard_user(self.spec, self.host) or None,
                           self.spec.creates, self.spec.unless, d.why)]


def build(spec: ShellSpec, inv: Inventory, host: Host) -> ShellStep:
    return ShellStep(spec, host)
