"""Fact: the host's addresses and the interface holding each (`ip -o addr`). Pure parser."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

from provision.frozen import frozen

from .spec import FactsError, FactSpec, Rec

# a Linux interface name: at most 15 bytes, no slash, space or colon (IFNAMSIZ)
_IFNAME = re.compile(r"[A-Za-z0-9_.+-]{1,15}")


@frozen
class Addresses:
    """interface -> its addresses (without prefix length), in the order `ip` lists them."""

    by_interface: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def interface_of(self, address: str) -> str | None:
        """The interface holding `address` (None: the host has no such address)."""
        want = ipaddress.ip_address(address)
        for name, addrs in self.by_interface:
            if any(ipaddress.ip_address(a) == want for a in addrs):
                return name
        return None


def parse(records: Sequence[Rec]) -> Addresses:
    out: dict[str, list[str]] = {}
    for r in records:
        if len(r.fields) != 2 or not _IFNAME.fullmatch(r.fields[0]):
            raise FactsError(f"line {r.line}: not an interface and address: {r.raw!r}")
        try:
            address = str(ipaddress.ip_interface(r.fields[1]).ip)
        except ValueError:
            raise FactsError(f"line {r.line}: not an address: {r.fields[1]!r}") from None
        out.setdefault(r.fields[0], []).append(address)
    return Addresses(tuple((k, tuple(v)) for k, v in out.items()))


SPEC = FactSpec("addresses", ("addr",), parse)
