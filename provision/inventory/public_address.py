"""`public_address`: where the internet reaches a host or bastion whose own `address` is
not that (behind NAT, an AWS elastic IP). Pure.

It is an IP address (a name would have to be resolved first), and a public one: a
loopback, link-local, unspecified, multicast, RFC 1918, shared (100.64.0.0/10, carrier
NAT) or unique-local (fc00::/7) address is refused, since such an address is the host's
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

NOT_PUBLIC = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"))
DESCRIPTION = ("the address the internet reaches this machine at when `address` is not it "
               "(NAT, an elastic IP): a public IPv4 or IPv6 address; public zones' from_hosts "
               "records and the exposure checks use it")


def problem(text: str) -> str:
    """Why `text` (a valid IP literal) is no public address, or ""."""
    ip = ipaddress.ip_address(text)
    kind = ("loopback" if ip.is_loopback else "link-local" if ip.is_link_local else
            "unspecified" if ip.is_unspecified else "multicast" if ip.is_multicast else
            "private" if any(ip in n for n in NOT_PUBLIC if n.version == ip.version) else "")
    if not kind:
        return ""
    return (f"{text} is a {kind} address, not one the internet reaches: public_address is "
            "the public IPv4/IPv6 address in front of the host (NAT, elastic IP); its own "
            "address goes in 'address'")


def check_public_address(value: str) -> str:
    ip = check_ip(value)
    why = problem(ip)
    if why:
        raise ValueError(why)
    return ip


PublicAddress = Annotated[str, AfterValidator(check_public_address)]
