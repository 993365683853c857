"""Cross-layer DNS findings: the inventory's zone records against its hosts and bastions.

Pure: an Inventory in, findings out; no DNS query, no provider import.

* An A/AAAA record whose address no host or bastion has (directly, as its
  `public_address`, or through its own name in one of the inventory's zones): a warning
  naming the record.
* A host or bastion whose `address` is a name in one of the inventory's zones, where
  the zone's records send that name to another host's address: an error (connections
  and host keys would go to the wrong machine). A name the zone has no record for: a
  warning (it may be someone else's record, but provision does not manage it).
"""

from __future__ import annotations

import ipaddress

from provision.dnsdata.names import canonical
from provision.finding import Finding
from provision.inventory.fields import is_ip
from provision.inventory.model import Host, Inventory, Record, Zone


def _fqdn(name: str, zone: str) -> str:
    """The one normalisation `dns plan` uses too (``api.example.org`` in example.org is
    api.example.org, not api.example.org.example.org), without the trailing dot."""
    return canonical(name, zone).rstrip(".")


Declared = dict[str, list[tuple[Zone, Record]]]


def _records(inv: Inventory) -> Declared:
    """fqdn (lowercase, no trailing dot) -> the records declared at that name."""
    out: Declared = {}
    for z in inv.dns.zones if inv.dns else ():
        for r in z.records:
            out.setdefault(_fqdn(r.name, z.name).lower(), []).append((z, r))
    return out


def _zone_of(inv: Inventory, name: str) -> Zone | None:
    zones = [z for z in (inv.dns.zones if inv.dns else ())
             if name == z.name or name.endswith("." + z.name)]
    return max(zones, key=lambda z: len(z.name), default=None)


def _resolve(name: str, records: Declared) -> tuple[str, ...] | None:
    """Addresses the inventory's own records give `name` (following in-inventory CNAMEs);
    None when they say nothing (no record, or a CNAME leaving the inventory's zones)."""
    seen: set[str] = set()
    while name not in seen and len(seen) < 8:
        seen.add(name)
        recs = [r for _, r in records.get(name, [])]
        if not recs:
            return None
        cname = next((r for r in recs if r.type == "CNAME"), None)
        if cname is None:
            return tuple(v for r in recs if r.type in ("A", "AAAA") for v in r.values)
        name = cname.values[0].rstrip(".").lower()
    return None


def dns_findings(inv: Inventory) -> list[Finding]:
    if inv.dns is None:
        return []
    records = _records(inv)
    nodes: list[Host] = [*inv.bastions, *inv.hosts]
    literal = {str(ipaddress.ip_address(h.address)): h.name for h in reversed(nodes) if is_ip(h.address)}
    owner = dict(literal)  # address -> node name, also through the nodes' own names
    for h in nodes:  # and the address the internet reaches it at (NAT, elastic IP)
        if h.public_address:
            owner.setdefault(str(ipaddress.ip_address(h.public_address)), h.name)
    fixed = dict(owner)  # the addresses nodes have without DNS: their own and public ones
    for h in nodes:
        if not is_ip(h.address):
            for a in _resolve(h.address.rstrip(".").lower(), records) or ():
                owner.setdefault(str(ipaddress.ip_address(a)), h.name)
    out: list[Finding] = []
    for z in inv.dns.zones:
        for r in z.records:
            if r.type not in ("A", "AAAA"):
                continue  # CNAME, TXT, MX, SRV, CAA: no address
            for i, v in enumerate(r.values):
                if str(ipaddress.ip_address(v)) not in owner:
                    out.append(Finding(
                        "warning", "dns-unknown-address", f"dns/{_fqdn(r.name, z.name)}",
                        f"{r.type} record {_fqdn(r.name, z.name)} points at {v}, which no host or "
                        "bastion of the inventory has",
                        "check the address, or add the host it belongs to",
                        f"dns.zones.{z.name}.records.{r.name}.values[{i}]"))
    for h in nodes:
        if is_ip(h.address):
            continue
        name = h.address.rstrip(".").lower()
        zone = _zone_of(inv, name)
        if zone is None:
            continue
        section = "bastions" if h.is_bastion else "hosts"
        addrs = _resolve(name, records)
        if addrs is None:
            if name not in records:
                out.append(Finding(
                    "warning", "dns-host-not-in-zone", h.name,
                    f"{h.name}'s address {h.address} is in zone {zone.name}, which has no record "
                    "for it in the inventory", f"add a record for it under dns.zones.{zone.name}",
                    f"{section}.{h.name}.address"))
            continue
        others = sorted({fixed[str(ipaddress.ip_address(a))] for a in addrs
                         if fixed.get(str(ipaddress.ip_address(a)), h.name) != h.name})
        if others:
            out.append(Finding(
                "error", "dns-host-mismatch", h.name,
                f"{h.name}'s address {h.address} resolves, by the records of zone {zone.name}, to "
                f"{', '.join(addrs)}: the address of {', '.join(others)}",
                f"fix the record for {h.address} or {h.name}'s address",
                f"{section}.{h.name}.address"))
    return out
