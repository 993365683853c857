"""Whether the zone's CAA records let the CA issue for a name (RFC 8659; pure).

The relevant record set is the CAA RRset of the name itself or, if it has none, of its
closest ancestor that has one. Within it, the `issue` properties (`issuewild` for a
wildcard, when present) say who may issue: none at all means anyone; a value whose
domain is one of the CA's CAA identities allows it; `;` alone allows nobody. A property
with the critical flag (128) and a tag we do not know forbids issuance (RFC 8659 §4.1).
Decided before any order: a CA that would refuse is a clear error, not a failed order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

_KNOWN_TAGS = frozenset({"issue", "issuewild", "iodef", "issuemail", "contactemail",
                         "contactphone", "issuevmc"})
_CAA = re.compile(r'^\s*(\d+)\s+([A-Za-z0-9]+)\s+"?(.*?)"?\s*$')


def parse(value: str) -> tuple[int, str, str] | None:
    """(flags, tag lowercase, value) of one CAA record in presentation form."""
    m = _CAA.match(value)
    if not m:
        return None
    return int(m.group(1)), m.group(2).lower(), m.group(3)


def ancestors(name: str, apex: str) -> list[str]:
    """`name` and its ancestors down to `apex` (absolute, lowercase, trailing dot)."""
    n = name.lower().rstrip(".") + "."
    top = apex.lower().rstrip(".") + "."
    out = [n]
    while n != top and "." in n.rstrip("."):
        n = n.split(".", 1)[1]
        out.append(n)
    return out


def problem(name: str, records: Mapping[str, Sequence[str]], identities: Sequence[str],
            apex: str, ca: str) -> str:
    """Why the CA `ca` (its CAA `identities`) may not issue for `name`, or "".
    `records`: absolute name -> the CAA values there (presentation form), for `name`
    and its ancestors up to the zone `apex`."""
    wildcard = name.startswith("*.")
    base = name[2:] if wildcard else name
    for at in ancestors(base, apex):
        values = records.get(at) or ()
        props = [p for p in map(parse, values) if p is not None]
        if not props:
            continue
        for flags, tag, _ in props:
            if flags & 128 and tag not in _KNOWN_TAGS:
                return (f"the CAA record {at} {flags} {tag} is marked critical and provision "
                        f"does not know the tag '{tag}': no CA may issue for {name}")
        issue = [v for _, t, v in props if t == "issue"]
        if wildcard and any(t == "issuewild" for _, t, _ in props):
            issue = [v for _, t, v in props if t == "issuewild"]
        if not issue:
            return ""
        allowed = {v.split(";", 1)[0].strip().lower() for v in issue} - {""}
        if not identities:
            return (f"the CAA records at {at} allow only {', '.join(sorted(allowed)) or 'no CA'}"
                    f", and {ca} names no CAA identity (its directory has no "
                    "meta.caaIdentities): give acme.caa_identities in the inventory")
        if allowed & {i.lower() for i in identities}:
            return ""
        who = ", ".join(sorted(allowed)) if allowed else "no CA (issue \";\")"
        return (f"the CAA records at {at} allow {who} to issue for {name}, not {ca} "
                f"({', '.join(identities)}): add a CAA record '0 issue \"{identities[0]}\"' "
                "to the zone, or use another CA")
    return ""
