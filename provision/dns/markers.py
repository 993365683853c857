"""Ownership markers: a TXT RRset at ``_provision.<name>`` with one string per owned
type and the owner id of the inventory that wrote it (``"provision owns A owner=ml-team"``,
`provision.dnsdata.owner`): who may change a name, and the markers refused as they are.
Pure."""


from __future__ import annotations

from collections.abc import Iterable

from provision.dnsdata.names import marker_owner, problem, reserved, split_marker
from provision.dnsdata.owner import problem as owner_problem
from provision.dnsdata.rdata import (
    MANAGED_TYPES,
)
from provision.frozen import frozen
from provision.text import printable

from .rrset import RRset, in_zone

MARKER_LABEL = "_provision"
MARKER_TYPE = "TXT"
MARKER_TTL = 300
MIGRATION_LABEL = "_provision-migration"   # an open `dns migrate`: its record is left alone
_MARKER_PREFIX = '"provision owns '
_OWNER_SEP = " owner="


# --- ownership markers --------------------------------------------------------------------

def marker_name(name: str, zone: str) -> str:
    """Where the ownership marker of `name` lives: ``_provision.<name>`` (a wildcard's
    ``*`` label becomes ``_wildcard``: a wildcard must stay the leftmost label; no
    record name may start with that label, so the spelling is injective)."""
    return marker_owner(MARKER_LABEL, name)


def marked_name(marker: str) -> str | None:
    """The record name a marker RRset covers, or None if `marker` is not a marker name."""
    parts = split_marker(marker)
    return parts[1] if parts is not None and parts[0] == MARKER_LABEL else None


def parse_claim(value: str) -> tuple[str, str | None, str]:
    """(type, owner id or None, "") of one string of an ownership marker, or
    ("", None, why) when it is not a string provision writes. Hostile input: the owner id
    is checked to the inventory's rule before it decides anything."""
    body = (value[len(_MARKER_PREFIX):-1] if value.startswith(_MARKER_PREFIX)
            and value.endswith('"') and len(value) > len(_MARKER_PREFIX) else "")
    rtype, sep, owner = body.partition(_OWNER_SEP)
    if rtype not in MANAGED_TYPES:
        return "", None, (f"the string {show_text(value)} is not one provision writes (\"provision "
                          f"owns T\" or \"provision owns T owner=ID\" with T one of "
                          f"{', '.join(MANAGED_TYPES)})")
    if not sep:
        return rtype, None, ""
    why = owner_problem(owner)
    if why:
        return "", None, f"the owner id in the string {show_text(value)}: {why}"
    return rtype, owner, ""


def owned_types(marker: RRset) -> set[str]:
    return {t for t, _, why in map(parse_claim, marker.values) if not why}


def marker_owner_id(marker: RRset) -> str | None:
    """The owner id a well-formed marker names (None: a marker without one)."""
    owners = {o for _, o, why in map(parse_claim, marker.values) if not why}
    return next(iter(owners)) if len(owners) == 1 else None


def marker_rrset(name: str, zone: str, types: Iterable[str], owner: str | None = None) -> RRset:
    """The marker of `name` claiming `types` for `owner` (None: no owner id, the format
    written before owner ids)."""
    tail = f"{_OWNER_SEP}{owner}" if owner else ""
    return RRset(marker_name(name, zone), MARKER_TYPE, MARKER_TTL,
                 tuple(sorted(f'{_MARKER_PREFIX}{t}{tail}"' for t in set(types))))


@frozen
class Claim:
    """What one well-formed ownership marker says: whose the name is, and which types."""

    marker: RRset
    owner: str | None       # None: a marker without owner id (read as every inventory's)
    types: frozenset[str]


def claims(actual: Iterable[RRset], zone: str) -> dict[str, Claim]:
    """name -> the claim of its ownership marker, for every marker provision wrote
    (others are left out, see `marker_problems`)."""
    out = {}
    for rr in actual:
        if rr.type != MARKER_TYPE:
            continue
        target = marked_name(rr.name)
        if target is None or not in_zone(target, zone) or _marker_problem(rr, target, zone):
            continue
        types = owned_types(rr)
        if types:
            out[target] = Claim(rr, marker_owner_id(rr), frozenset(types))
    return out


def ownership(actual: Iterable[RRset], zone: str,
              owner: str | None = None) -> dict[str, tuple[RRset, set[str]]]:
    """name -> (its marker RRset, the types provision owns there) for the markers of
    `owner` and those without an owner id. Markers that are not what provision writes
    are left out (see `marker_problems`), and so are other owners' (see `foreign`)."""
    return {n: (c.marker, set(c.types)) for n, c in claims(actual, zone).items()
            if c.owner is None or c.owner == owner}


def foreign(actual: Iterable[RRset], zone: str, owner: str | None) -> dict[str, Claim]:
    """name -> the claim of another owner's marker (a name provision must not change)."""
    return {n: c for n, c in claims(actual, zone).items()
            if c.owner is not None and c.owner != owner}


def _marker_problem(rr: RRset, target: str, zone: str) -> str:
    """Why the TXT RRset at ``_provision.<target>`` is not an ownership marker provision
    wrote (anyone who can write a TXT record in the zone can write one), or ""."""
    why = problem(target) or reserved(target)
    if why:
        return f"the name it covers, {show_text(target)}: {why}"
    if marker_name(target, zone) != rr.name:  # e.g. `_provision.*.x`: provision writes `_wildcard`
        return f"provision writes the marker of {show_text(target)} as {marker_name(target, zone)}"
    if not in_zone(target, zone):
        return f"it covers {target}, outside zone {zone}"
    owners = set()
    for v in rr.values:
        _, owner, why = parse_claim(v)
        if why:
            return why
        owners.add(owner)
    if len(owners) > 1:
        named = ", ".join(sorted(f"'{o}'" if o else "none" for o in owners))
        return (f"its strings name more than one owner ({named}); a marker belongs to one "
                "inventory")
    return ""


def marker_problems(actual: Iterable[RRset], zone: str) -> list[str]:
    """Every TXT RRset in provision's ownership namespace that is not a marker provision
    wrote: the plan of the zone is refused (nothing is sent) naming each."""
    out = []
    for rr in actual:
        if rr.type != MARKER_TYPE or not rr.name.startswith(MARKER_LABEL + "."):
            continue
        target = marked_name(rr.name)
        why = "it covers no record name" if target is None else _marker_problem(rr, target, zone)
        if why:
            out.append(f"the ownership marker {show_text(rr.name)} TXT is refused: {why}; remove or "
                       "fix it by hand")
    return out


def show_text(text: str) -> str:
    return printable(text[:200])
