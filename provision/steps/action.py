"""What every planned thing is (pure): it describes itself (`describe`: the plan's line,
`plan_op` and `plan_files`: its sign and the files it changes, for the diff); and what a
batch action adds: its own shell fragment (`script`), the shell libraries that fragment
calls (`libs`), and the unit it starts, for the batch's settle check (`settles`).

Adding an action is one class in one module (a subclass of `Action`) plus its fixture
cases; `provision.steps.script` and the engine only iterate. A subclass that does not
render itself cannot be made (`script` and `describe` are abstract), and
tests/unit/test_actions_render.py renders a sample of every one.
"""

from __future__ import annotations

import base64
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar, Literal

from provision.frozen import frozen

PlanOp = Literal["+", "-", "~"]


@frozen
class Lib:
    """A shell library a fragment calls, written once per batch before the actions, in
    `order` (the batch's order of libraries is part of its bytes)."""

    order: int
    name: str
    text: Callable[[], str]


@frozen
class FileChange:
    """A file a planned thing writes (`new`) or removes (`new` None), and what is there now
    (`old`; None: absent)."""

    path: str
    old: str | None
    new: str | None


class Described(ABC):
    """A planned thing, as the plan shows it."""

    __slots__ = ()

    @abstractmethod
    def describe(self) -> str:
        """One line of the plan (escaped when printed)."""

    def plan_op(self) -> PlanOp:
        """The plan's sign: + (something new), - (something removed), ~ (changed)."""
        return "~"

    def plan_files(self) -> tuple[FileChange, ...]:
        """The files it writes or removes, for the plan's diff."""
        return ()


class Action(Described):
    """One action of the batch (`provision.steps.script.build`)."""

    __slots__ = ()
    libs: ClassVar[tuple[Lib, ...]] = ()

    @abstractmethod
    def script(self) -> str:
        """Its shell lines in the batch (never empty; `set -eu` is on)."""

    def settles(self) -> tuple[str, tuple[int, ...]] | None:
        """(unit, its ports) when it starts a unit the batch checks is still up after."""
        return None


def b64(content: str) -> str:
    """Text for a here-document piped to `base64 -d` (bytes that are not UTF-8 kept)."""
    return base64.encodebytes(content.encode("utf-8", errors="surrogateescape")).decode()
