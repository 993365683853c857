"""The journal of one migration: a frozen record, its JSON form, and its file name.

Pure, no I/O (the shell in `run.py` writes it atomically: temp file, fsync, rename).

Phases, in order. The ones ending in -ing are *intents*: written before the provider
change they announce, so a crash between the change and the next journal write is
recognised by comparing the zone with the intent's before and after states.

    lowering -> lowered -> switching -> switched -> verified -> finalizing -> (closed)
    any phase -> rolling-back -> (closed)
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, field, replace
from typing import Any, Literal

from provision.dnsdata.names import RESERVED_LABELS, file_stem
from provision.frozen import frozen

VERSION = 1

Phase = Literal["lowering", "lowered", "switching", "switched", "verified",
                "finalizing", "rolling-back"]
PHASES: tuple[Phase, ...] = ("lowering", "lowered", "switching", "switched", "verified",
                             "finalizing", "rolling-back")
INTENTS: tuple[Phase, ...] = ("lowering", "switching", "finalizing", "rolling-back")
STABLE: tuple[Phase, ...] = ("lowered", "switched", "verified")


class JournalError(ValueError):
    """A journal file that cannot be read back (the message names what is wrong)."""


@frozen
class Snapshot:
    """A record (and its migration marker) exactly as read from the provider."""

    values: tuple[str, ...] | None      # None: the record did not exist
    ttl: int | None
    marker: tuple[str, ...] | None = None   # the marker RRset's TXT strings, None if absent
    marker_ttl: int | None = None


@frozen
class Journal:
    name: str                           # absolute, lowercase, trailing dot
    type: str                           # A | AAAA | CNAME
    zone: str                           # absolute
    provider: str
    original_values: tuple[str, ...]
    original_ttl: int
    target_values: tuple[str, ...]
    lower_ttl: int
    phase: Phase
    started_at: float                   # epoch seconds
    lowered_at: float | None = None     # when every authoritative server served the lowered TTL
    switched_at: float | None = None    # when every authoritative server served the new values
    verified_at: float | None = None
    forced: bool = False                # cutover before the old TTL had run out
    final_ttl: int | None = None        # set by finalize
    rollback_from: Snapshot | None = None   # set by rollback: what it replaces
    token: str = ""                     # the provider's id of the last change (Route53, Cloud DNS)
    history: tuple[tuple[float, str], ...] = field(default_factory=tuple)  # (time, event)
    by: str = ""                        # who opened it (user@host)
    version: int = VERSION

    def at(self, phase: Phase, now: float, event: str = "", **changes: Any) -> Journal:
        """This journal moved to `phase` at `now` (with `changes`), the event noted."""
        return replace(self, phase=phase, **changes,
                       history=(*self.history, (round(now, 3), event or phase)))

    @property
    def stale_until(self) -> float | None:
        """When no cache can hold the original values any more (after a cutover)."""
        if self.switched_at is None:
            return None
        end = self.switched_at + self.lower_ttl
        if self.forced and self.lowered_at is not None:
            end = max(end, self.lowered_at + self.original_ttl)
        elif self.forced:
            end = max(end, self.switched_at + self.original_ttl)
        return end

    @property
    def cutover_ready_at(self) -> float | None:
        """When the old TTL has run out since the lowered TTL was served everywhere."""
        return None if self.lowered_at is None else self.lowered_at + self.original_ttl


def to_json(j: Journal) -> str:
    d = asdict(j)
    return json.dumps(d, indent=2, sort_keys=True) + "\n"


_SAFE = re.compile(r"^\*?[a-z0-9._-]+$")


def file_name(name: str) -> str:
    """The journal's file name for record `name` (absolute): ``api.example.org.json``.

    Injective: names are checked before (`provision.dnsdata.names.check_record`: no other
    characters, and no name starts with the reserved ``_wildcard`` label that spells '*'),
    so two records never share a journal or a lock; anything else is refused here."""
    n = name.rstrip(".").lower()
    if not _SAFE.match(n) or n.split(".", 1)[0] in RESERVED_LABELS:
        raise JournalError(f"{name!r} is not a record name provision keeps a journal for")
    return file_stem(n) + ".json"
