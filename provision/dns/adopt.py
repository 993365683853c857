"""A zone's records as inventory YAML (`provision import dns`). Pure, no I/O.

What a provider serves is hostile input (anyone who can write the zone chose it). A
record is written into the inventory only when the inventory reads it back as exactly
the RRset the provider served, so `dns plan` right after adopting shows no changes:

* its type is in `FORMS` (the types provision manages; one entry per type says how its
  RRset is written as an inventory record);
* its name is one the inventory accepts, written relative to the zone, and reads back as
  the same name; its TTL and values pass the checks a plan applies to a provider's answer;
* it is no Route53 alias (the inventory has no alias records), no marker of provision's
  own (``_provision…``: never copied, adopting is not owning), and not at a name another
  owner's ownership marker claims (that record is theirs).

Everything else is listed as YAML comments: every character outside printable ASCII
escaped, so no value from the zone can end a comment line and write YAML. No
ownership marker is written: the first `dns apply` that changes a record marks it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from provision.dns.markers import foreign
from provision.dns.rrset import RRset, relative
from provision.dnsdata.names import BadName, canonical, check_record, reserved
from provision.dnsdata.rdata import DATA_TYPES, BadValue, declared, ttl_problem, values_problem
from provision.frozen import frozen
from provision.inventory.fields import check_record_name
from provision.inventory.schema import RecordDoc
from provision.text import printable

Form = Callable[[RRset], dict[str, Any]]
MAX_SHOWN = 300   # characters of one skipped record shown in its comment


def _values(rr: RRset) -> dict[str, Any]:
    return {"type": rr.type, "values": list(rr.values), "ttl": rr.ttl}


def _target(rr: RRset) -> dict[str, Any]:
    return {"type": rr.type, "value": rr.values[0].rstrip("."), "ttl": rr.ttl}


# type -> its inventory record (the order here is the order at one name). A type
# provision starts to manage is one entry (the inventory's record field for its values).
FORMS: dict[str, Form] = {
    "A": _values,
    "AAAA": _values,
    "CNAME": _target,
    # in the presentation form provision reads them in (TXT quoted, host names absolute):
    # the read-back check below refuses what the inventory would spell differently
    "TXT": _values,
    "MX": _values,
    "SRV": _values,
    "CAA": _values,
}


@frozen
class Skipped:
    rrset: RRset
    why: str

    def line(self, zone: str) -> str:
        """One comment line (without '# '): printable ASCII only."""
        rr = self.rrset
        data = (f"alias to {rr.alias.dns_name}" if rr.alias is not None
                else " ".join(rr.values))
        text = f"{relative(rr.name, zone)} {rr.type} ttl {rr.ttl} {data}"
        if len(text) > MAX_SHOWN:
            text = text[:MAX_SHOWN] + "..."
        return comment_text(f"{text}  ({self.why})")


@frozen
class Adopted:
    records: dict[str, Any]           # the zone's `records:` (relative name -> record(s))
    imported: tuple[RRset, ...]       # the RRsets they stand for, as the provider served them
    skipped: tuple[Skipped, ...]


def comment_text(text: str) -> str:
    """`text` safe inside a YAML comment: escaped by `printable`, then every non-ASCII
    character as an escape too (YAML also ends a line at U+0085, U+2028 and U+2029)."""
    return printable(text).encode("ascii", "backslashreplace").decode("ascii")


def adopt(zone: str, actual: Sequence[RRset], owner: str | None) -> Adopted:
    """The records of `zone` (absolute) the inventory can declare as served, the rest
    with the reason each is left out."""
    theirs = foreign(actual, zone, owner)
    keep: list[RRset] = []
    skipped: list[Skipped] = []
    for rr in sorted(actual):
        why = _why_not(rr, zone, theirs)
        if why:
            skipped.append(Skipped(rr, why))
        else:
            keep.append(rr)
    # a CNAME must be alone at its name in the inventory (and in DNS)
    types_at: dict[str, set[str]] = {}
    for rr in keep:
        types_at.setdefault(rr.name, set()).add(rr.type)
    for rr in [rr for rr in keep if rr.type == "CNAME" and len(types_at[rr.name]) > 1]:
        keep.remove(rr)
        skipped.append(Skipped(rr, "a CNAME beside other records at its name"))
    order = list(FORMS)
    records: dict[str, Any] = {}
    for rr in sorted(keep, key=lambda r: (relative(r.name, zone), order.index(r.type))):
        key = relative(rr.name, zone)
        entry = FORMS[rr.type](rr)
        if key not in records:
            records[key] = entry
        elif isinstance(records[key], list):
            records[key].append(entry)
        else:
            records[key] = [records[key], entry]
    return Adopted(records, tuple(keep), tuple(skipped))


def _why_not(rr: RRset, zone: str, theirs: Mapping[str, Any]) -> str:
    if reserved(rr.name):
        return "provision's own marker: not copied"
    if rr.type not in FORMS:
        return f"type {rr.type}: not one provision manages"
    claim = theirs.get(rr.name)
    if claim is not None:
        return f"owner '{claim.owner}' manages this name (its marker {claim.marker.name})"
    if rr.alias is not None:
        return "a Route53 alias: the inventory has no alias records"
    rel = relative(rr.name, zone)
    try:
        check_record(rel, zone)
        check_record_name(rel)
    except (BadName, ValueError) as e:
        return f"the name: {e}"
    if rel == rr.name or canonical(rel, zone) != rr.name:
        return "the inventory cannot spell this name relative to the zone"
    why = ttl_problem(rr.ttl) or values_problem(rr.type, list(rr.values))
    if why:
        return f"the provider's answer: {why}"
    try:  # the inventory's own checks of the record as it would be written
        RecordDoc.model_validate(FORMS[rr.type](rr))
        if rr.type in DATA_TYPES:
            for v in rr.values:
                if declared(rr.type, v) != v:
                    return f"the inventory would spell {v!r} differently"
    except ValidationError as e:
        return f"the inventory refuses it: {e.errors()[0]['msg']}"
    except BadValue as e:
        return f"the inventory refuses it: {e}"
    return ""
