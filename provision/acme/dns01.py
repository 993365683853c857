"""The DNS-01 challenge through the inventory's own zones (I/O: the zone's provider and
its authoritative servers).

The record is written through whichever of the inventory's providers holds the name's
zone (the longest zone of the inventory the name is in), with its ownership marker, and
waited for until EVERY authoritative server of the zone answers it with AA (the check
`dns migrate` uses for cutovers: `provision.dns.propagation`): a CA asks one server of
its choice, so one server still serving the old data is a failed validation. DNS
credentials stay on this machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from provision.dns import propagation as prop
from provision.dns.markers import marker_name
from provision.dns.provider import Provider, ProviderError, provider_for
from provision.dns.rrset import RRset, in_zone
from provision.dns.zone_plan import ChangeSet
from provision.dnsdata.names import canonical
from provision.errors import OperationError
from provision.inventory.model import Inventory, Zone

from . import caa, challenge

MakeProvider = Callable[[Zone, Inventory], Provider]


class ChallengeError(OperationError):
    """The challenge record could not be written, served or removed (exit 1)."""


def zone_of(inv: Inventory, name: str) -> Zone:
    """The inventory's zone that holds `name` (the longest), or ChallengeError."""
    fq = name.lower().rstrip(".") + "."
    fq = fq[2:] if fq.startswith("*.") else fq
    zones = [z for z in (inv.dns.zones if inv.dns else ()) if in_zone(fq, z.name)]
    if not zones:
        known = ", ".join(z.name for z in inv.dns.zones) if inv.dns else "none"
        raise ChallengeError(f"{name} is in no zone of the inventory (zones: {known}): "
                             "provision answers DNS-01 through the inventory's own zones")
    return max(zones, key=lambda z: len(z.name))


class Dns01:
    def __init__(self, inv: Inventory, make_provider: MakeProvider = provider_for,
                 timeout: float = 120.0):
        self.inv = inv
        self.owner = inv.dns.owner if inv.dns else None
        self.make_provider = make_provider
        self.timeout = timeout
        self._providers: dict[str, Provider] = {}

    def provider(self, zone: Zone) -> Provider:
        if zone.name not in self._providers:
            self._providers[zone.name] = self.make_provider(zone, self.inv)
        return self._providers[zone.name]

    def _at(self, name: str) -> tuple[Zone, Provider, str, list[RRset]]:
        zone = zone_of(self.inv, name)
        p = self.provider(zone)
        rname = challenge.record_name(name)
        origin = canonical("@", zone.name)
        actual = [r for r in (p.get_rrset(rname, "TXT"),
                              p.get_rrset(marker_name(rname, origin), "TXT")) if r is not None]
        return zone, p, rname, actual

    def caa_records(self, name: str) -> tuple[str, Mapping[str, Sequence[str]]]:
        """(the zone's apex, name -> CAA values) for `name` and its ancestors in its zone."""
        zone = zone_of(self.inv, name)
        p = self.provider(zone)
        apex = canonical("@", zone.name)
        out: dict[str, Sequence[str]] = {}
        for at in caa.ancestors(name.removeprefix("*."), apex):
            rr = p.get_rrset(at, "CAA")
            if rr is not None:
                out[at] = rr.values
        return apex, out

    def _apply(self, p: Provider, changes: ChangeSet, what: str) -> None:
        if not changes:
            return
        try:
            token = p.apply(changes)
            p.wait(changes, token, self.timeout)
        except ProviderError as e:
            raise ChallengeError(f"{what}: {e.message}") from None

    def write(self, name: str, values: Sequence[str]) -> str:
        """Write the challenge TXT of `name`; returns the record's name."""
        zone, p, rname, actual = self._at(name)
        changes, why = challenge.write(rname, canonical("@", zone.name), values, actual,
                                       self.owner)
        if why:
            raise ChallengeError(why)
        self._apply(p, changes, f"writing {rname} TXT through {p.kind}")
        return rname

    def remove(self, name: str) -> bool:
        """Remove our challenge TXT of `name` (a leftover included); whether one was there."""
        zone, p, rname, actual = self._at(name)
        changes, why = challenge.remove(rname, canonical("@", zone.name), actual, self.owner)
        if why:
            raise ChallengeError(why)
        self._apply(p, changes, f"removing {rname} TXT through {p.kind}")
        return bool(changes)

    def wait_served(self, records: Mapping[str, Sequence[str]]) -> None:
        """Until every authoritative server of each record's zone answers it (AA) with
        exactly the values; ChallengeError naming who does not, after the timeout."""
        by_zone: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {}
        for rname, values in records.items():
            zone = zone_of(self.inv, rname)
            want = tuple(sorted(f'"{v}"' for v in values))
            by_zone.setdefault(zone.name, []).append((rname, "TXT", want))
        for zname, expectations in by_zone.items():
            zone = zone_of(self.inv, zname)
            p = self.provider(zone)
            resolvers = self.inv.dns.resolvers if self.inv.dns else ()
            targets, unknown = prop.authoritative_targets(
                p.nameservers(), p.direct, resolvers, zone.visibility, zone.name)
            if zone.visibility == "private":
                targets = [prop.Target(r, r, "authoritative") for r in resolvers]
            if unknown:
                raise ChallengeError(f"no address for the name servers {', '.join(unknown)} of "
                                     f"{zone.name}: the challenge cannot be seen served by all")
            verdicts = prop.wait_served(targets, expectations, self.timeout)
            late = [f"{v.name} ({', '.join(v.disagree)})" for v in verdicts if not v.served]
            if late:
                raise ChallengeError(f"the challenge record is not served by every "
                                     f"authoritative server after {self.timeout:g} s: "
                                     f"{'; '.join(late)}")
