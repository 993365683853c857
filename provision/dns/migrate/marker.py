"""The in-zone marker of an open migration: a TXT RRset ``_provision-migration.<name>``.

Pure, no I/O. The marker is written in the same atomic change as the record it
describes (lowering writes it, the switch rewrites it, finalize and rollback delete it),
so the zone alone says whether a migration is open and in which phase, from any machine
and even without the journal. One TXT string per fact, each ``key=value``:

    "provision-migration=1" "phase=lowered" "type=A" "ttl=300" "lower=60"
    "started=2026-11-30T03:20:00Z" "at=2026-11-30T03:20:01Z" "by=alice@laptop"
    "from=203.0.113.10" "to=203.0.113.20"

``ttl`` is the original TTL, ``at`` the time of the change that wrote this phase, ``by``
who opened the migration (``$USER@hostname``; absent in markers of older versions).
``finalize`` turns the marker into a closed migration's record (``phase=closed``, see
`closed`), which this module does not read: it is no open migration.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Literal

from provision.dns.markers import MIGRATION_LABEL
from provision.dns.rrset import RRset, rrset
from provision.dnsdata.names import marker_owner, split_marker
from provision.frozen import frozen

LABEL = MIGRATION_LABEL
TYPE = "TXT"
MarkerPhase = Literal["lowered", "switched"]
OPERATOR = re.compile(r"^[A-Za-z0-9._-]{1,32}@[A-Za-z0-9.-]{1,63}$")  # user@host


@frozen
class Marker:
    phase: MarkerPhase
    type: str
    original_ttl: int
    lower_ttl: int
    started_at: float
    at: float
    original_values: tuple[str, ...]
    target_values: tuple[str, ...]
    by: str = ""


def marker_name(name: str) -> str:
    """``_provision-migration.<name>`` (a wildcard's ``*`` becomes ``_wildcard``)."""
    return marker_owner(LABEL, name)


def marked_name(marker: str) -> str | None:
    """The record name a marker covers, or None when `marker` is no marker name."""
    parts = split_marker(marker)
    return parts[1] if parts is not None and parts[0] == LABEL else None


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def marker_rrset(name: str, m: Marker) -> RRset:
    """The marker RRset for record `name` (absolute). `at` is rounded up to the second:
    a time read back from the marker is never earlier than the change."""
    strings = ["provision-migration=1", f"phase={m.phase}", f"type={m.type}",
               f"ttl={m.original_ttl}", f"lower={m.lower_ttl}",
               f"started={iso(math.floor(m.started_at))}", f"at={iso(math.ceil(m.at))}",
               *([f"by={m.by}"] if m.by else []),
               *(f"from={v}" for v in m.original_values), *(f"to={v}" for v in m.target_values)]
    return rrset(marker_name(name), TYPE, m.lower_ttl, [f'"{s}"' for s in strings])


def parse(rr: RRset) -> Marker | None:
    """The marker an RRset holds, or None when it is not one provision wrote."""
    facts: dict[str, list[str]] = {}
    for v in rr.values:
        s = v.strip()
        if s.startswith('"') and s.endswith('"'):
            s = s[1:-1]
        key, sep, value = s.partition("=")
        if sep:
            facts.setdefault(key, []).append(value)
    try:
        if facts.get("provision-migration") != ["1"]:
            return None
        phase = facts["phase"][0]
        if phase not in ("lowered", "switched"):
            return None
        by = facts.get("by", [""])
        if len(by) != 1 or (by[0] and not OPERATOR.match(by[0])):
            return None
        return Marker(phase=phase,  # type: ignore[arg-type]
                      type=facts["type"][0], original_ttl=int(facts["ttl"][0]),
                      lower_ttl=int(facts["lower"][0]),
                      started_at=parse_iso(facts["started"][0]), at=parse_iso(facts["at"][0]),
                      original_values=tuple(sorted(facts.get("from", []))),
                      target_values=tuple(sorted(facts.get("to", []))), by=by[0])
    except (KeyError, IndexError, ValueError):
        return None
