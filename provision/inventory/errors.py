"""Validation problems that point at a file, a line and a field. Pure data."""

from __future__ import annotations

from dataclasses import dataclass

from provision.errors import UsageError
from provision.text import printable


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with the inventory, located as precisely as we can."""

    file: str
    line: int
    column: int
    field: str
    message: str

    def __str__(self) -> str:
        # Every part may carry text from the inventory (a key, a file name): one line each,
        # no control characters, so a hostile value cannot forge or hide output.
        where = f"{printable(self.file)}:{self.line}:{self.column}"
        message = printable(self.message)
        return f"{where}: {printable(self.field)}: {message}" if self.field else f"{where}: {message}"


class InventoryError(UsageError):
    """The inventory was rejected; carries every problem found, sorted by position."""

    prefix = ""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(set(problems))
        super().__init__("\n".join(str(p) for p in self.problems))
