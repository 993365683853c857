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


# per family: (the block public space is drawn from, the blocks inside it that are not public)
_SPACE = {4: ("0.0.0.0/0", _V4_NOT_PUBLIC), 6: (_V6_PUBLIC[0], ())}


@cache
def _space(version: int) -> tuple[Any, tuple[Any, ...], int]:
    """(base network, its non-public holes, public address count): the holes are disjoint
    CIDR blocks inside the base, so the count is plain subtraction (splitting the space into
    disjoint networks cost ~5 ms of every `provision check`)."""
    base_text, holes_text = _SPACE[version]
    base = ipaddress.ip_network(base_text)
    holes = tuple(ipaddress.ip_network(h) for h in holes_text)
    return base, holes, base.num_addresses - sum(h.num_addresses for h in holes)


@cache
def public_space(version: int) -> tuple[Any, ...]:
    """The public address space of a family as disjoint networks (116 for IPv4: what the
    tests check the holes against; `public_share` counts without splitting the space)."""
    base, holes, _ = _space(version)
    nets: list[Any] = [base]
    for hole in holes:
        nets = [piece for n in nets
                for piece in (n.address_exclude(hole) if hole.subnet_of(n)
                              else [] if n.subnet_of(hole) else [n])]
    return tuple(ipaddress.collapse_addresses(nets))


def _overlap(a: Any, b: Any) -> int:
    """Addresses two CIDR blocks of one family share: one holds the other, or none."""
    if a.subnet_of(b):
        return int(a.num_addresses)
    if b.subnet_of(a):
        return int(b.num_addresses)
    return 0


def public_share(cidrs: Iterable[str], version: int) -> float:
    """The fraction (0..1) of the family's public space that the union of `cidrs` covers."""
    nets: list[Any] = []
    for c in cidrs:
        net = ipaddress.ip_network(c, strict=False)
        if net.version == version:
            nets.append(net)
    base, holes, total = _space(version)
    # the collapsed union is disjoint blocks: each counts what it shares with the base
    # minus what it shares with each hole
    covered = sum(_overlap(u, base) - sum(_overlap(u, h) for h in holes)
                  for u in ipaddress.collapse_addresses(nets))
    return covered / total


def covers_internet(cidrs: Iterable[str]) -> bool:
    """True when the union of `cidrs` holds at least THRESHOLD of public IPv4 or IPv6 space."""
    return _covers(tuple(cidrs))


@functools.lru_cache(maxsize=4096)
def _covers(cidrs: tuple[str, ...]) -> bool:
    # Pure, and fleets repeat the same few source lists (a role's ssh_from on 10,000 hosts):
    # judged once per distinct list (~2 ms each), not once per host.
    return any(public_share(list(cidrs), v) >= THRESHOLD for v in (4, 6))
