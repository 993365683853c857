"""What a step is. Pure.

A step turns (inventory, host) into a fact request and a pure diff (facts -> planned
actions). A new step is one module under `provision/steps/` with a `build(inv, host)`
factory, plus one line in `STEPS` (`provision.steps.registry`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from provision.facts import Facts, Request

from .actions import Action
from .commit import CommitConfirmed
from .python_task import RunTask
from .refused import Refused

__all__ = ["Planned", "Refused", "Step"]

# What a diff may plan: plain actions (one batch), a commit-confirmed change, or a Python
# task (run on the operator's machine, provision.pytasks.load).
Planned = Action | CommitConfirmed | RunTask


class Step(Protocol):
    @property
    def name(self) -> str: ...

    def request(self) -> Request: ...

    def diff(self, facts: Facts) -> Sequence[Planned]: ...


