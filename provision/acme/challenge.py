"""The DNS-01 challenge record as a change to the zone (pure).

The TXT RRset `_acme-challenge.NAME` is written like every record provision writes: with
its ownership marker (`_provision._acme-challenge.NAME`, naming the inventory's owner
id) in the same atomic change, so that only provision removes it and `dns apply` knows
it is provision's. A TXT there that no marker of ours claims (another ACME client's, or
a hand-made one) is never changed: that is an error naming it. A challenge left behind
(a run killed between the write and the removal) is ours by its marker, and removed by
the next run before it writes its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from provision.dns.markers import marker_rrset, ownership
from provision.dns.rrset import RRset, rrset
from provision.dns.zone_plan import ChangeSet

LABEL = "_acme-challenge"
TTL = 60


def record_name(name: str) -> str:
    """`_acme-challenge.NAME.` for the certificate name `name` (a wildcard's `*.` dropped,
    RFC 8555 §8.4)."""
    base = name.lower().rstrip(".")
    base = base[2:] if base.startswith("*.") else base
    return f"{LABEL}.{base}."


def _ours(name: str, zone: str, actual: Sequence[RRset], owner: str | None) -> tuple[
        RRset | None, RRset | None, str]:
    """(our TXT there, our marker, "" ) or (None, None, why not ours)."""
    txt = next((r for r in actual if r.name == name and r.type == "TXT"), None)
    owned = ownership(actual, zone, owner).get(name)
    marker = owned[0] if owned else None
    if txt is not None and (owned is None or "TXT" not in owned[1]):
        return None, None, (f"{name} TXT is in the zone and no ownership marker of this "
                            "inventory claims it (another ACME client's challenge, or a record "
                            "made by hand): provision does not change it; remove it, or wait "
                            "for its owner to")
    return txt, marker, ""


def write(name: str, zone: str, values: Sequence[str], actual: Sequence[RRset],
          owner: str | None) -> tuple[ChangeSet, str]:
    """The change that makes `name` (absolute) hold exactly the TXT `values` (the key
    authorizations' digests), marked ours; `actual`: what is at `name` and its marker
    now. (change, "") or (empty, why it is refused)."""
    txt, marker, why = _ours(name, zone, actual, owner)
    if why:
        return ChangeSet(), why
    new = rrset(name, "TXT", TTL, [f'"{v}"' for v in values])
    new_marker = marker_rrset(name, zone, {"TXT"}, owner)
    deletions = tuple(r for r in (txt, marker) if r is not None and r not in (new, new_marker))
    additions = tuple(r for r in (new, new_marker) if r not in (txt, marker))
    return ChangeSet(deletions, additions), ""


def remove(name: str, zone: str, actual: Sequence[RRset], owner: str | None) -> tuple[
        ChangeSet, str]:
    """The change that removes our challenge at `name` and its marker (nothing when there
    is none); refused when the TXT there is not ours."""
    txt, marker, why = _ours(name, zone, actual, owner)
    if why:
        return ChangeSet(), why
    return ChangeSet(tuple(r for r in (txt, marker) if r is not None)), ""
