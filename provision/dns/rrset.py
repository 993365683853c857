"""DNS records as data: names made absolute or relative to their zone, values
normalised (IPv6 compressed, CNAME targets absolute and lowercase; TXT, MX, SRV and CAA in
dnspython's presentation form, `provision.dnsdata.rdata`), the `RRset` every provider
reads into and writes from, and the RRsets an inventory zone declares. Pure."""


from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from provision.dnsdata.names import canonical
from provision.dnsdata.rdata import (
    DATA_TYPES,
    BadValue,
)
from provision.dnsdata.rdata import canonical as canonical_value
from provision.inventory.model import Zone

# --- names and values -------------------------------------------------------------------

def absolute(name: str, zone: str) -> str:
    """`name` as an absolute, lowercase name with a trailing dot.

    '@' (or '') is the apex; a name ending in '.' is already absolute; anything else is
    relative to `zone`, unless it already ends with the zone's name (``api.example.org``
    in zone example.org is taken as meant, not as ``api.example.org.example.org``).
    The one normalisation: `provision.dnsdata.names.canonical` (the inventory uses it too).
    """
    return canonical(name, zone)


def relative(name: str, zone: str) -> str:
    """The absolute `name` relative to `zone` ('@' for the apex), for display."""
    origin = zone.rstrip(".").lower() + "."
    if name == origin:
        return "@"
    if name.endswith("." + origin):
        return name[: -len(origin) - 1]
    return name


def in_zone(name: str, zone: str) -> bool:
    origin = zone.rstrip(".").lower() + "."
    return name == origin or name.endswith("." + origin)


def normalise_value(rtype: str, value: str) -> str:
    """The canonical text of one value, so equal data compares equal across providers."""
    v = value.strip()
    if rtype in ("A", "AAAA"):
        try:
            return str(ipaddress.ip_address(v))
        except ValueError:
            return v
    if rtype in ("CNAME", "NS", "PTR"):
        return v.lower() if v.endswith(".") else v.lower() + "."
    if rtype in DATA_TYPES:
        try:
            return canonical_value(rtype, v)
        except BadValue:
            return v  # refused where it would be acted on (`values_problem`)
    return v


@dataclass(frozen=True, order=True)
class Alias:
    """A Route53 alias target: it has no TTL of its own (the target's TTL applies)."""

    dns_name: str
    hosted_zone_id: str
    evaluate_target_health: bool = False


@dataclass(frozen=True, order=True)
class RRset:
    """All records of one name and type. `ttl` is None only for a Route53 alias."""

    name: str                       # absolute, lowercase, trailing dot
    type: str
    ttl: int | None
    values: tuple[str, ...] = ()    # normalised, sorted, unique
    alias: Alias | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.name, self.type)

    def describe(self) -> str:
        if self.alias is not None:
            return f"alias to {self.alias.dns_name} (alias records have no TTL of their own)"
        return f"{', '.join(self.values)} ttl {self.ttl}"


def rrset(name: str, rtype: str, ttl: int | None, values: Iterable[str],
          alias: Alias | None = None) -> RRset:
    """An RRset with its name and values normalised (name must already be absolute)."""
    rt = rtype.upper()
    n = name.lower() if name.endswith(".") else name.lower() + "."
    vals = tuple(sorted({normalise_value(rt, v) for v in values}))
    return RRset(n, rt, ttl, vals, alias)


def desired(zone: Zone) -> list[RRset]:
    """The RRsets the inventory declares for `zone`."""
    return [rrset(absolute(r.name, zone.name), r.type, r.ttl, r.values) for r in zone.records]
