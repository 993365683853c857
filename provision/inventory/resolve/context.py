"""What every section of the resolver shares: the document, its positions, and the one way
to fail (a `Problem` at the field's file:line:col, every problem collected in one run)."""

from __future__ import annotations

import os

from ..errors import Problem
from ..schema import InventoryDoc
from ..source import FieldPath, SourceDoc, dotted


class Context:
    """The parsed document, where its fields were written, and the problems found so far."""

    def __init__(self, doc: InventoryDoc, source: SourceDoc):
        self.doc = doc
        self.source = source
        self.problems: list[Problem] = []

    def fail(self, path: FieldPath, message: str) -> None:
        pos = self.source.where(path)
        self.problems.append(Problem(pos.file, pos.line, pos.column, dotted(path), message))

    def logins(self) -> set[str]:
        """Every account the operator logs in as (passwordless sudo on the hosts)."""
        d = self.doc
        return ({d.defaults.user} | {h.user for h in d.hosts.values() if h.user}
                | {b.user for b in d.bastions.values() if b.user})

    def local_path(self, path: FieldPath, value: str | None) -> str | None:
        """A key or credentials path on the operator's machine: `~` expanded, and a
        relative path taken from the directory of the inventory file that names it."""
        if value is None:
            return None
        p = os.path.expanduser(value)
        if not os.path.isabs(p):
            base = os.path.dirname(self.source.where(path).file)
            p = os.path.join(base, p) if base else p
        return p


class Section:
    """One section of the resolver: reads the document, reports through the shared context."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.doc = ctx.doc
        self.source = ctx.source
        self.fail = ctx.fail
