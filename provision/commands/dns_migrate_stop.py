"""What Ctrl-C says during `dns migrate` (pure words; the handler is `provision.interrupt`'s).

A migration moves phase by phase, each one change: the journal records the intent, the
zone gets one atomic change set, the journal records the phase reached. The first Ctrl-C
lets the change in flight finish (sent and served) and starts no further phase; the second
leaves at once. Either way the journal says where the migration stands, and the same
commands resume it or roll it back.
"""

from __future__ import annotations

import shlex

from provision.dns.migrate.journal import INTENTS
from provision.text import printable

STOPPING = ("stopping: the change in flight finishes and is served, no further phase starts "
            "(Ctrl-C again to leave at once)")


def commands(name: str, inventory: str | None) -> tuple[str, str, str]:
    """The exact commands that show, resume and roll back the migration of `name`."""
    inv = f" -i {printable(shlex.quote(inventory))}" if inventory else ""
    base = f"provision dns migrate {{}} {printable(shlex.quote(name.rstrip('.')))}{inv}"
    return base.format("status"), base.format("run"), base.format("rollback")


def where_lines(label: str, name: str, phase: str | None, journal: str,
                inventory: str | None) -> list[str]:
    """Where the migration of `label` stands (its journal's phase) and the commands that
    resume it or roll it back (with the full `name`: a bare label may be ambiguous)."""
    status, resume, rollback = commands(name, inventory)
    if phase is None:
        return [f"the migration of {printable(label)} is not open (no journal): nothing to resume"]
    lines = [f"the migration of {printable(label)} is in phase {printable(phase)} "
             f"(journal {printable(journal)})"]
    if phase in INTENTS:
        lines.append(f"  its change to the zone may be sent or not (one atomic change set: "
                     f"whole or absent); `{status}` reads the zone and settles the journal")
    lines += [f"  resume:    {resume}", f"  roll back: {rollback}"]
    return lines
