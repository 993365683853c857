"""The record a finished migration leaves in the zone: ``_provision-closed-<type>.<name>``.

Pure, no I/O. `finalize` deletes the migration marker ``_provision-migration.<name>`` and
writes this, in the same atomic change that raises the TTL back, so the zone remembers for
a while (default 7 days) that the record was moved on purpose. One per name and type (a
migration of the AAAA record at the same name, opened, rolled back or finalized, leaves
the A record's alone); a second finalize of the same record merges the earlier record's
unexpired ``from`` values into its own, so each old value stays guarded:

    "provision-migration=1" "phase=closed" "name=app.lab.test." "type=A"
    "at=2026-11-30T03:20:09Z" "until=2026-12-07T03:20:09Z" "by=alice@laptop"
    "from=10.1.0.5" "to=10.1.0.9"

`dns plan`/`apply` refuse (without ``--allow-revert NAME``) to set any of its ``from``
values (that are not also ``to`` values) back while it lasts, and delete it once ``until``
has passed, or the zone's ``closed_migration_days`` after ``at`` if that is sooner. It
never counts as an open migration.

Anyone who may write to the zone may write such a TXT RRset, so `parse` is strict: every
string ``"key=value"``, known keys only, each single key exactly once, values checked to
the record type's rules, ``name`` equal to the record the RRset's own name covers, times
in order and the period at most `MAX_KEEP`, at most `MAX_STRINGS` strings; `in_force`
adds what needs the clock: ``at`` no later than now (plus `SKEW`). Anything else is a
`ClosedError`: the caller refuses to act on that record at all.
"""

from __future__ import annotations

import ipaddress
import math
import re

from provision.dns.rrset import RRset, rrset
from provision.dnsdata.names import CLOSED_PREFIX, marker_owner, split_marker
from provision.frozen import frozen

from .marker import OPERATOR, iso, parse_iso

TTL = 300                       # of the closed record itself (what caches keep it for)
DEFAULT_KEEP = 7 * 86400.0
MAX_KEEP = 366 * 86400.0        # a hostile `until` cannot hold a record back for years
MAX_STRINGS = 40                # provision writes at most 7 + 16 + 16
MAX_VALUES = 16
MAX_STRING = 255                # one TXT character-string
_SINGLE = ("provision-migration", "phase", "name", "type", "at", "until", "by")
_TYPES = ("A", "AAAA", "CNAME")
_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")
PREFIX = CLOSED_PREFIX   # the owner's first label: PREFIX + the type, lowercase
SKEW = 600.0                    # clocks of the machines that finalize may differ this much
SLACK = 60.0                    # until - at of a record this zone wrote, beyond its keep


class ClosedError(ValueError):
    """A marker that says ``phase=closed`` but is not one provision could have written."""


@frozen
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


def closed_name(name: str, rtype: str) -> str:
    """``_provision-closed-a.<name>`` (a wildcard's ``*`` becomes ``_wildcard``)."""
    return marker_owner(PREFIX + rtype.lower(), name)


def closed_covered(owner: str) -> tuple[str, str] | None:
    """The (record name, type) a closed record's owner name covers, or None."""
    parts = split_marker(owner)
    if parts is None or not parts[0].startswith(PREFIX):
        return None
    rtype = parts[0][len(PREFIX):].upper()
    return (parts[1], rtype) if rtype in _TYPES else None


def claims_closed(rr: RRset) -> bool:
    """The RRset says it is a closed migration's record (well-formed or not)."""
    return any(_unquote(v) == "phase=closed" for v in rr.values)


def closed_rrset(c: Closed) -> RRset:
    """The TXT RRset for `c` (times rounded outward to the second: never shorter)."""
    strings = ["provision-migration=1", "phase=closed", f"name={c.name}", f"type={c.type}",
               f"at={iso(math.floor(c.at))}", f"until={iso(math.ceil(c.until))}", f"by={c.by}",
               *(f"from={v}" for v in c.from_values), *(f"to={v}" for v in c.to_values)]
    return rrset(closed_name(c.name, c.type), "TXT", TTL, [f'"{s}"' for s in strings])


def parse(rr: RRset) -> Closed:
    """The closed-migration record `rr` holds. Raises ClosedError naming what is wrong."""
    if rr.type != "TXT":
        raise ClosedError(f"a {rr.type} RRset, not TXT")
    owner = closed_covered(rr.name)
    if owner is None:
        raise ClosedError(f"{rr.name[:80]} is not a closed record's name")
    covered, owner_type = owner
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
        raise ClosedError(f"it names {name[:80]!r}, but it sits at the closed record of {covered}")
    rtype = single["type"]
    if rtype != owner_type:
        raise ClosedError(f"type {rtype[:16]!r}, but it sits at the closed record of "
                          f"{covered} {owner_type}")
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


def in_force(c: Closed, now: float, keep: float) -> bool:
    """Whether `c` still guards its record at `now` in a zone that keeps closed records
    `keep` seconds: not past its ``until``, nor past ``at`` + `keep` (a record claiming a
    longer period than this zone writes lasts no longer than one it wrote; with `keep` 0
    the zone keeps none). Raises
    ClosedError for an ``at`` in the future: such a record would guard for ever."""
    if c.at > now + SKEW:
        raise ClosedError(f"its at {iso(c.at)} is in the future (more than "
                          f"{SKEW / 60:.0f} minutes ahead of this clock)")
    return keep > 0 and now < min(c.until, c.at + keep + SLACK)


def merged(prev: Closed | None, c: Closed, now: float, keep: float) -> Closed:
    """The closed record a second finalize of the same record writes: `c`, with the
    ``from`` values of the earlier one still in force (`prev`) that `c` does not move
    to, so that none of them may come back unnoticed. Capped at MAX_VALUES (`c`'s own
    first)."""
    if prev is None or prev.type != c.type or c.type == "CNAME":
        return c
    try:
        if not in_force(prev, now, keep):
            return c
    except ClosedError:
        return c
    extra = [v for v in prev.from_values if v not in c.from_values and v not in c.to_values]
    values = (*c.from_values, *extra)[:MAX_VALUES]
    return Closed(c.name, c.type, c.at, c.until, c.by, tuple(sorted(values)), c.to_values)


def _unquote(v: str) -> str | None:
    s = v.strip()
    if len(s) < 2 or not (s.startswith('"') and s.endswith('"')):
        return None
    inner = s[1:-1]
    if '"' in inner or "\\" in inner:
        return None
    return inner


def check_values(rtype: str, values: tuple[str, ...], key: str) -> None:
    """1 to MAX_VALUES values of `rtype` (A, AAAA, CNAME: one), canonical, each once.
    Raises ClosedError naming the first fault (also used for an open marker's values)."""
    if rtype not in _TYPES:
        raise ClosedError(f"type {rtype[:16]!r} (A, AAAA or CNAME)")
    if not 1 <= len(values) <= (1 if rtype == "CNAME" else MAX_VALUES) \
            or len(set(values)) != len(values):
        raise ClosedError(f"{len(values)} '{key}' values (1 to {MAX_VALUES}, each once; a "
                          "CNAME has one)")
    for v in values:
        _check_value(rtype, v, key)


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
