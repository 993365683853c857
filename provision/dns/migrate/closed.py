"""The record a finished migration leaves in the zone: ``phase=closed`` in the marker RRset.

Pure, no I/O. `finalize` rewrites the migration marker ``_provision-migration.<name>``
into this, in the same atomic change that raises the TTL back, so the zone remembers for a
while (default 7 days) that the record was moved on purpose:

    "provision-migration=1" "phase=closed" "name=app.lab.test." "type=A"
    "at=2026-11-30T03:20:09Z" "until=2026-12-07T03:20:09Z" "by=alice@laptop"
    "from=10.1.0.5" "to=10.1.0.9"

`dns plan`/`apply` refuse (without --force) to set the record back to its ``from``
values while it lasts, and delete it once ``until`` has passed. It never counts as an
open migration.

Anyone who may write to the zone may write such a TXT RRset, so `parse` is strict: every
string ``"key=value"``, known keys only, each single key exactly once, values checked to
the record type's rules, ``name`` equal to the record the RRset's own name covers, times
in order and the period at most `MAX_KEEP`, at most `MAX_STRINGS` strings. Anything else
is a `ClosedError`: the caller refuses to act on that record at all.
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass

from provision.dns.records import RRset, rrset

from .marker import OPERATOR, iso, marked_name, marker_name, parse_iso

TTL = 300                       # of the closed record itself (what caches keep it for)
DEFAULT_KEEP = 7 * 86400.0
MAX_KEEP = 366 * 86400.0        # a hostile `until` cannot hold a record back for years
MAX_STRINGS = 40                # provision writes at most 7 + 16 + 16
MAX_VALUES = 16
MAX_STRING = 255                # one TXT character-string
_SINGLE = ("provision-migration", "phase", "name", "type", "at", "until", "by")
_TYPES = ("A", "AAAA", "CNAME")
_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")


class ClosedError(ValueError):
    """A marker that says ``phase=closed`` but is not one provision could have written."""


@dataclass(frozen=True)
class Closed:
    name: str                        # absolute, lowercase, trailing dot
    type: str
    at: float                        # when the migration was finalized
    until: float                     # when this record expires
    by: str                          # who finalized it (user@host)
    from_values: tuple[str, ...]
    to_values: tuple[str, ...]

    def expired(self, now: float) -> bool:
        return now >= self.until


def claims_closed(rr: RRset) -> bool:
    """The RRset says it is a closed migration's record (well-formed or not)."""
    return any(_unquote(v) == "phase=closed" for v in rr.values)


def closed_rrset(c: Closed) -> RRset:
    """The TXT RRset for `c` (times rounded outward to the second: never shorter)."""
    strings = ["provision-migration=1", "phase=closed", f"name={c.name}", f"type={c.type}",
               f"at={iso(math.floor(c.at))}", f"until={iso(math.ceil(c.until))}", f"by={c.by}",
               *(f"from={v}" for v in c.from_values), *(f"to={v}" for v in c.to_values)]
    return rrset(marker_name(c.name), "TXT", TTL, [f'"{s}"' for s in strings])


def parse(rr: RRset) -> Closed:
    """The closed-migration record `rr` holds. Raises ClosedError naming what is wrong."""
    if rr.type != "TXT":
        raise ClosedError(f"a {rr.type} RRset, not TXT")
    covered = marked_name(rr.name)
    if covered is None:
        raise ClosedError(f"{rr.name} is not a migration marker name")
    if len(rr.values) > MAX_STRINGS:
        raise ClosedError(f"{len(rr.values)} strings (at most {MAX_STRINGS})")
    single: dict[str, str] = {}
    lists: dict[str, list[str]] = {"from": [], "to": []}
    for v in rr.values:
        s = _unquote(v)
        if s is None:
            raise ClosedError("a string that is not one quoted key=value")
        if len(s) > MAX_STRING:
            raise ClosedError(f"a string of {len(s)} characters (at most {MAX_STRING})")
        key, sep, value = s.partition("=")
        if not sep:
            raise ClosedError("a string without '='")
        if key in lists:
            lists[key].append(value)
        elif key in _SINGLE:
            if key in single:
                raise ClosedError(f"'{key}' given twice")
            single[key] = value
        else:
            raise ClosedError(f"unknown key {key[:32]!r}")
    missing = [k for k in _SINGLE if k not in single]
    if missing:
        raise ClosedError(f"missing {', '.join(missing)}")
    if single["provision-migration"] != "1" or single["phase"] != "closed":
        raise ClosedError("not a closed migration (provision-migration=1 phase=closed)")
    name = single["name"]
    if name != covered:
        raise ClosedError(f"it names {name[:80]!r}, but it sits at the marker of {covered}")
    rtype = single["type"]
    if rtype not in _TYPES:
        raise ClosedError(f"type {rtype[:16]!r} (A, AAAA or CNAME)")
    try:
        at, until = parse_iso(single["at"]), parse_iso(single["until"])
    except ValueError:
        raise ClosedError("at/until are not YYYY-MM-DDTHH:MM:SSZ times") from None
    if not at <= until <= at + MAX_KEEP:
        raise ClosedError(f"until must be after at and at most {MAX_KEEP / 86400:.0f} days later")
    if not OPERATOR.match(single["by"]):
        raise ClosedError("by is not user@host (letters, digits, . _ -)")
    out: dict[str, tuple[str, ...]] = {}
    for key, values in lists.items():
        if not 1 <= len(values) <= MAX_VALUES:
            raise ClosedError(f"{len(values)} '{key}' values (1 to {MAX_VALUES})")
        if len(set(values)) != len(values):
            raise ClosedError(f"a '{key}' value given twice")
        for value in values:
            _check_value(rtype, value, key)
        out[key] = tuple(sorted(values))
    if rtype == "CNAME" and (len(out["from"]) != 1 or len(out["to"]) != 1):
        raise ClosedError("a CNAME has exactly one 'from' and one 'to'")
    if out["from"] == out["to"]:
        raise ClosedError("'from' and 'to' are the same")
    return Closed(name, rtype, at, until, single["by"], out["from"], out["to"])


def _unquote(v: str) -> str | None:
    s = v.strip()
    if len(s) < 2 or not (s.startswith('"') and s.endswith('"')):
        return None
    inner = s[1:-1]
    if '"' in inner or "\\" in inner:
        return None
    return inner


def _check_value(rtype: str, value: str, key: str) -> None:
    """Values exactly as provision writes them (canonical text), nothing else."""
    if rtype in ("A", "AAAA"):
        try:
            addr = ipaddress.ip_address(value)
        except ValueError:
            raise ClosedError(f"{key} {value[:64]!r} is not an IP address") from None
        if str(addr) != value or addr.version != (4 if rtype == "A" else 6):
            raise ClosedError(f"{key} {value[:64]!r} is not an IPv{4 if rtype == 'A' else 6} "
                              "address in canonical form")
        return
    labels = value[:-1].split(".") if value.endswith(".") else None
    if labels is None or len(value) > 254 or not all(_LABEL.match(lab) for lab in labels):
        raise ClosedError(f"{key} {value[:64]!r} is not an absolute lowercase host name")


def ago(seconds: float) -> str:
    """'3 minutes', '2 hours', '5 days' (for messages)."""
    s = max(0, int(seconds))
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if s >= size:
            n = s // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{s} second{'s' if s != 1 else ''}"


def describe(c: Closed, now: float) -> str:
    """``app.lab.test was moved 10.1.0.5 -> 10.1.0.9 by alice@laptop 3 minutes ago``."""
    return (f"{c.name.rstrip('.')} was moved {', '.join(c.from_values)} -> "
            f"{', '.join(c.to_values)} by {c.by} {ago(now - c.at)} ago")
