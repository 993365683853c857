"""`public_address`: where the internet reaches a host or bastion whose own `address` is
not that (behind NAT, an AWS elastic IP). Pure.

It is an IP address (a name would have to be resolved first), and a public one: a
loopback, link-local, unspecified, multicast, RFC 1918, shared (100.64.0.0/10, carrier
NAT) or unique-local (fc00::/7) address is refused, and so is any other that is not global
(Python's `is_global`: reserved, benchmarking, 6to4/NAT64/mapped forms of those), since such an address is the host's
`address` itself or no address the internet reaches. The documentation ranges
(192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32) are accepted so that
examples and tests never name a real machine.

Used by a public zone's `from_hosts` (the A/AAAA record of such a host holds its public
address), by the DNS findings (a record pointing at it has a host) and by the security
group findings (`sg-source-public-address`).
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import AfterValidator

from .fields import check_ip

DOCUMENTATION = tuple(ipaddress.ip_network(n) for n in (
    "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"))
DESCRIPTION = ("the address the internet reaches this machine at when `address` is not it "
               "(NAT, an elastic IP): a public IPv4 or IPv6 address; public zones' from_hosts "
               "records and the exposure checks use it")


def _inner(ip: ipaddress.IPv4Address | ipaddress.IPv6Address
           ) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, NAT64), which is what it reaches;
    Python 3.11 classifies `::ffff:10.0.0.1` by its IPv6 form alone."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in ipaddress.ip_network("64:ff9b::/96"):
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def problem(text: str) -> str:
    """Why `text` (a valid IP literal) is no public address, or ""."""
    written = ipaddress.ip_address(text)
    ip = _inner(written)
    if any(ip in n for n in DOCUMENTATION if n.version == ip.version):
        return ""
    old_v6 = isinstance(ip, ipaddress.IPv6Address) and (
        ip.is_site_local or ip in ipaddress.ip_network("::/96"))  # deprecated, never routed
    kind = ("loopback" if ip.is_loopback else "link-local" if ip.is_link_local else
            "unspecified" if ip.is_unspecified else "multicast" if ip.is_multicast else
            "site-local or IPv4-compatible" if old_v6 else "" if ip.is_global else
            "private" if ip.is_private else "reserved")
    if not kind:
        return ""
    carried = f" (it carries the IPv4 address {ip})" if ip != written else ""
    return (f"{text}{carried} is a {kind} address, not one the internet reaches: public_address is "
            "the public IPv4/IPv6 address in front of the host (NAT, elastic IP); its own "
            "address goes in 'address'")


def check_public_address(value: str) -> str:
    ip = check_ip(value)
    why = problem(ip)
    if why:
        raise ValueError(why)
    return ip


PublicAddress = Annotated[str, AfterValidator(check_public_address)]
