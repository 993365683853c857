"""Does a set of sources amount to "the internet"? Pure, no I/O.

`0.0.0.0/0` is the obvious way to open a port to everyone; `0.0.0.0/1` + `128.0.0.0/1`,
`2000::/3` or a pile of /2s are the disguised ones. The rule, per address family:

- IPv4: the public space is 0.0.0.0/0 minus the special-purpose blocks that are not
  globally routable (RFC 6890 and successors: 0/8, 10/8, 100.64/10, 127/8, 169.254/16,
  172.16/12, 192.0.0/24, 192.0.2/24, 192.88.99/24, 192.168/16, 198.18/15, 198.51.100/24,
  203.0.113/24, 224/4 multicast, 240/4 reserved and broadcast) — 3,702,258,432
  addresses.
- IPv6: the public space is 2000::/3, the global unicast block IANA allocates from.

The union of the sources *covers the internet* when it holds at least half
(`THRESHOLD` = 50 %) of the public space of either family. So `0.0.0.0/0`, `::/0`,
`0.0.0.0/1 + 128.0.0.0/1`, `0.0.0.0/1` alone (≈ 56 % of public IPv4), `2000::/3` and
`2000::/4` do; `128.0.0.0/1` alone (≈ 43 %), a /8 or a cloud provider's ranges do not.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable
from functools import cache
from typing import Any

THRESHOLD = 0.5

_V4_NOT_PUBLIC = ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
                  "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
                  "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4")
_V6_PUBLIC = ("2000::/3",)


@cache
def public_space(version: int) -> tuple[Any, ...]:
    """The public address space of a family as disjoint networks."""
    if version == 6:
        return tuple(ipaddress.ip_network(n) for n in _V6_PUBLIC)
    nets: list[Any] = [ipaddress.ip_network("0.0.0.0/0")]
    for text in _V4_NOT_PUBLIC:
        hole = ipaddress.ip_network(text)
        nxt: list[Any] = []
        for n in nets:
            if hole.subnet_of(n):
                nxt.extend(n.address_exclude(hole))
            elif not n.subnet_of(hole):
                nxt.append(n)
        nets = nxt
    return tuple(ipaddress.collapse_addresses(nets))


def public_share(cidrs: Iterable[str], version: int) -> float:
    """The fraction (0..1) of the family's public space that the union of `cidrs` covers."""
    nets: list[Any] = []
    for c in cidrs:
        net = ipaddress.ip_network(c, strict=False)
        if net.version == version:
            nets.append(net)
    union = list(ipaddress.collapse_addresses(nets))
    space = public_space(version)
    covered = 0
    for u in union:
        for p in space:
            if u.subnet_of(p):
                covered += u.num_addresses
            elif p.subnet_of(u):
                covered += p.num_addresses
    total: int = sum(p.num_addresses for p in space)
    return covered / total


def covers_internet(cidrs: Iterable[str]) -> bool:
    """True when the union of `cidrs` holds at least THRESHOLD of public IPv4 or IPv6 space."""
    return _covers(tuple(cidrs))


@functools.lru_cache(maxsize=4096)
def _covers(cidrs: tuple[str, ...]) -> bool:
    # Pure, and fleets repeat the same few source lists (a role's ssh_from on 10,000 hosts):
    # judged once per distinct list (~2 ms each), not once per host.
    return any(public_share(list(cidrs), v) >= THRESHOLD for v in (4, 6))
