"""The Python task step: `- task: tasks/cuda.py:install_cuda` in a playbook. Pure.

The step runs the user's function on the operator's machine (`provision.pytasks.load`
imports it and calls it); here is only the decision. Its `check` (the shell layer calls it
after the probe, `checked`) says whether the task is done: True skips it, False runs it, no
check runs it on every apply. See `provision.task` for how a task is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from provision.facts import Facts, Request
from provision.frozen import frozen
from provision.inventory.model import Host, Inventory

from .action import Described
from .command import Decision


@frozen
class TaskSpec:
    """One `task:` entry of a playbook, as validated by `provision.playbook`."""

    label: str
    path: str  # as written: relative to the inventory's directory, or absolute
    function: str
    where: str = ""  # file:line:col of the entry

    @property
    def ref(self) -> str:
        return f"{self.path}:{self.function}"


@frozen
class Loaded:
    """A task's code, imported by `provision.pytasks.load.load` from `file`."""

    fn: Callable[[Any, Host], Any]
    check: Callable[[Any, Host], Any] | None
    file: str  # the real path imported


@frozen
class RunTask(Described):
    """Call the task's function with the host's connection and model (operator's machine)."""

    label: str
    ref: str
    loaded: Loaded = dataclasses.field(repr=False, compare=False)
    why: str = ""
    checked: bool = False  # has a check: it is called again after the task (verify)

    def describe(self) -> str:
        return f"run task {self.ref} ({self.why})"


def decide(label: str, has_check: bool, done: bool | None) -> Decision:
    """`done`: what the check returned (None: no check)."""
    if not has_check:
        return Decision(label, True, "no check: runs on every apply")
    if done:
        return Decision(label, False, "its check says done")
    return Decision(label, True, "its check says not done")


@frozen
class TaskStep:
    spec: TaskSpec
    host: Host
    loaded: Loaded
    done: bool | None = None  # the check's answer, set by `checked` (None: not asked)

    @property
    def name(self) -> str:
        return self.spec.label

    def request(self) -> Request:
        return Request()

    def checked(self, done: bool) -> TaskStep:
        return dataclasses.replace(self, done=done)

    def decision(self, facts: Facts) -> Decision:
        if self.loaded.check is not None and self.done is None:
            raise TypeError(f"task {self.spec.ref}: its check was not called")
        return decide(self.name, self.loaded.check is not None, self.done)

    def diff(self, facts: Facts) -> list[RunTask]:
        d = self.decision(facts)
        return [RunTask(self.name, self.spec.ref, self.loaded, d.why,
                        self.loaded.check is not None)] if d.run else []


def build(spec: TaskSpec, loaded: Loaded | None, inv: Inventory, host: Host) -> TaskStep:
    if loaded is None:  # a programming error: plan/apply load every task before building
        raise TypeError(f"task {spec.ref}: its code was not loaded")
    return TaskStep(spec, host, loaded)
