"""The values of the record types provision manages, checked as text. Pure, no I/O.

Provider answers, journals and markers are checked with these before their values go
into a change (as a prerequisite or as new data): a value that is not exactly an IPv4
address (A), an IPv6 address (AAAA) or one absolute host name (CNAME) is refused, so a
hostile answer or file can never smuggle other record data, quotes or a second record
into the UPDATE message, the change batch or the Cloud DNS request.
"""

from __future__ import annotations

import ipaddress
import re

from provision.text import printable

from .names import problem

MANAGED_TYPES = ("A", "AAAA", "CNAME")
MIN_TTL, MAX_TTL = 1, 604800
MAX_VALUES = 100          # values in one RRset provision writes (Route53's own limit is 400)
_IP_TEXT = re.compile(r"^[0-9A-Fa-f:.]{2,45}$")


def value_problem(rtype: str, value: object) -> str:
    """Why `value` is not a valid `rtype` value, or ""."""
    if not isinstance(value, str):
        return f"{type(value).__name__} where a text value was expected"
    if rtype in ("A", "AAAA"):
        want = 4 if rtype == "A" else 6
        if _IP_TEXT.match(value):
            try:
                if ipaddress.ip_address(value).version == want:
                    return ""
            except ValueError:
                pass
        return f"not an IPv{want} address (an {rtype} record holds IPv{want} addresses)"
    if rtype == "CNAME":
        target = value.lower() if value.endswith(".") else value.lower() + "."
        why = problem(target, wildcard=False)
        if not why and target.count(".") < 2:
            why = "a single label (a top-level domain)"
        return f"not a host name: {why}" if why else ""
    return f"type {rtype} is not one provision manages (only {', '.join(MANAGED_TYPES)})"


def values_problem(rtype: str, values: object) -> str:
    """Why `values` is not a valid set of `rtype` values, or ""."""
    if not isinstance(values, (list, tuple)) or not values:
        return "no values (a list of at least one value was expected)"
    if len(values) > MAX_VALUES:
        return f"{len(values)} values, at most {MAX_VALUES}"
    for v in values:
        why = value_problem(rtype, v)
        if why:
            return f"{_show(v)}: {why}"
    if rtype == "CNAME" and len(set(values)) != 1:
        return "a CNAME holds exactly one target"
    return ""


def ttl_problem(ttl: object) -> str:
    if type(ttl) is not int or not MIN_TTL <= ttl <= MAX_TTL:
        return f"TTL {_show(ttl)} is not a whole number of seconds from {MIN_TTL} to {MAX_TTL}"
    return ""


def _show(v: object) -> str:
    """A short, escaped rendering of a hostile value for a message."""
    text = repr(v) if not isinstance(v, str) else v
    return repr(printable(text[:80]) + ("…" if len(text) > 80 else ""))
