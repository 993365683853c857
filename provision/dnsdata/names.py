"""DNS names as provision reads them: the one normalisation, the limits, the reserved spaces.

Pure, no I/O. Every name provision acts on (the inventory's record names, the name a
journal or marker is filed under, the names a provider returns for records provision
manages) goes through `canonical`; names that differ only in case, a trailing dot, or
relative versus absolute spelling (``api`` and ``api.example.org`` in zone example.org)
are one name.

Reserved: provision writes its ownership markers at ``_provision.<name>`` and migration
markers at ``_provision-migration.<name>``, and spells a wildcard's ``*`` as
``_wildcard`` in marker names and journal file names. A record whose first label is one
of those three would share a marker, a journal or a lock with another record, so such
names are refused wherever a user can give one (the inventory, the CLI).
"""

from __future__ import annotations

import re

from provision.text import printable

MAX_NAME = 253        # octets of an absolute name, without the trailing dot (RFC 1035: 255 on the wire)
MAX_LABEL = 63
OWNERSHIP_LABEL = "_provision"
MIGRATION_LABEL = "_provision-migration"
WILDCARD_LABEL = "_wildcard"
CLOSED_PREFIX = "_provision-closed-"   # + the type: a finished migration's record
RESERVED_LABELS = (OWNERSHIP_LABEL, MIGRATION_LABEL, WILDCARD_LABEL)
# the longest prefix provision puts in front of a record name (a closed-migration record
# of a CNAME, `_provision-closed-cname.`; a migration marker's is shorter)
MARKER_ROOM = max(len(MIGRATION_LABEL), len(CLOSED_PREFIX + "cname")) + 1

_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")


class BadName(ValueError):
    """A name provision refuses; the message says why in words."""


def origin(zone: str) -> str:
    return zone.strip().rstrip(".").lower() + "."


def canonical(name: str, zone: str) -> str:
    """`name` absolute, lowercase, with a trailing dot. '@' (or '') is the apex; a name
    ending in '.' is absolute; a name ending with the zone's name is taken as meant
    (``api.example.org`` in example.org); anything else is relative to `zone`."""
    o = origin(zone)
    n = name.strip().lower()
    if n in ("@", ""):
        return o
    if n.endswith("."):
        return n
    if n == o[:-1] or n.endswith("." + o[:-1]):
        return n + "."
    return f"{n}.{o}"


def in_zone(name: str, zone: str) -> bool:
    o = origin(zone)
    return name == o or name.endswith("." + o)


def problem(fqdn: str, *, wildcard: bool = True, room: int = 0) -> str:
    """Why the absolute name `fqdn` is not one provision manages, or "" when it is.

    Letters, digits, '_' and '-' in labels of 1-63 octets, at most 253 octets in all
    (less `room`, the octets of a marker prefix that must still fit); a '*' only as the
    whole first label."""
    if not fqdn.endswith("."):
        return "not an absolute name"
    body = fqdn[:-1]
    if not body:
        return "the root is not a record name"
    if len(body) > MAX_NAME - room:
        extra = f" (the {room}-octet marker prefix provision writes before it must fit "\
                f"in {MAX_NAME})" if room else ""
        return f"{len(body)} octets long, at most {MAX_NAME - room} allowed{extra}"
    labels = body.split(".")
    for i, lab in enumerate(labels):
        if lab == "*" and i == 0 and wildcard:
            continue
        if not lab:
            return "an empty label ('..')"
        if len(lab) > MAX_LABEL:
            return (f"a label of {len(lab)} octets ('{printable(lab[:20])}…'), at most "
                    f"{MAX_LABEL} allowed")
        if not _LABEL.match(lab):
            return (f"the label '{printable(lab[:80])}' has characters other than letters, digits, '_' and "
                    "'-' (or starts or ends with '-')" if lab != "*" else
                    "a '*' is allowed only as the whole first label")
    return ""


def reserved(fqdn: str) -> str:
    """Why `fqdn` lies in one of provision's reserved spaces, or "" when it does not."""
    first = fqdn.split(".", 1)[0]
    if first in RESERVED_LABELS or first.startswith(CLOSED_PREFIX):
        return (f"names starting with the label '{first}' are reserved for provision's "
                f"markers (ownership '{OWNERSHIP_LABEL}.<name>', migration "
                f"'{MIGRATION_LABEL}.<name>', finished migrations "
                f"'{CLOSED_PREFIX}<type>.<name>', '{WILDCARD_LABEL}' spelling a wildcard's '*')")
    return ""


def check_record(name: str, zone: str) -> str:
    """The absolute name of a record a user names (inventory key or CLI argument) in
    `zone`; BadName with the reason when provision would refuse to manage it."""
    fq = canonical(name, zone)
    why = problem(fq, room=MARKER_ROOM) or reserved(fq)
    if not why and not in_zone(fq, zone):
        why = f"not inside zone {origin(zone)}"
    if why:
        raise BadName(why)
    return fq


def marker_label(name: str) -> str:
    """`name` with a wildcard's '*' spelled as the reserved label (for marker names)."""
    labels = name.split(".")
    if labels[0] == "*":
        labels[0] = WILDCARD_LABEL
    return ".".join(labels)


def unmarker_label(name: str) -> str:
    labels = name.split(".")
    if labels[0] == WILDCARD_LABEL:
        labels[0] = "*"
    return ".".join(labels)


def marker_owner(label: str, name: str) -> str:
    """Where a marker of record `name` lives, `<label>.<name>` (`label`: one of
    provision's reserved first labels): a wildcard's '*' must stay the leftmost label,
    so it is spelled as the reserved wildcard label."""
    return f"{label}.{marker_label(name)}"


def split_marker(owner: str) -> tuple[str, str] | None:
    """(first label, the record name it covers) of a marker's owner name
    ``<label>.<name>``; None when `owner` has no room for a record name after its label.
    The one reading of every marker name (ownership, migration, closed migration)."""
    first, _, rest = owner.partition(".")
    if rest.count(".") < 1:
        return None
    return first, unmarker_label(rest)


def file_stem(fqdn: str) -> str:
    """The journal/lock file stem of the record `fqdn` (a checked name: lowercase letters,
    digits, '_', '-', '.', a leading '*'): injective on such names because no checked
    name starts with the reserved wildcard label."""
    return marker_label(fqdn.rstrip(".").lower())


def cli_name(name: str, zones: list[str]) -> tuple[str, str]:
    """(zone, absolute name) for a NAME given on the command line, the longest zone that
    holds it; BadName otherwise, its message a predicate ("is in none of …") to follow
    the name. One reading for every command (`dns
    check`, `dns migrate …`): a name ending in '.' or containing a dot is fully
    qualified; a bare label is taken in the only zone. The name's own form is checked
    before its zone, so `api.example.org..` is an empty label, not "in no zone"."""
    n = name.strip()
    if not n:
        raise BadName("is not a record name: it is empty")
    if any(not c.isprintable() or c.isspace() for c in n):
        raise BadName("is not a record name: it has spaces, control or invisible characters")
    if n == "@":  # the apex, as in the inventory: only when there is one zone to mean
        if len(zones) == 1:
            return zones[0], origin(zones[0])
        raise BadName(f"is the apex of which zone? the inventory has {len(zones)} zones; "
                      "give the zone's name")
    fq = n.lower() if n.endswith(".") else n.lower() + "."
    why = problem(fq)
    if why:
        raise BadName(f"is not a record name: {why}")
    for z in sorted(zones, key=lambda z: -len(z)):
        if in_zone(fq, z):
            return z, fq
    bare = not n.endswith(".") and "." not in n
    if bare and len(zones) == 1:
        return zones[0], canonical(n, zones[0])
    if bare and len(zones) > 1:
        raise BadName(f"is a bare label and the inventory has {len(zones)} zones "
                      f"({', '.join(zones)}): give the full name, e.g. "
                      f"{printable(n)}.{zones[0].rstrip('.')}")
    raise BadName(f"is in none of the inventory's zones ({', '.join(zones) or 'no dns.zones'})")
