"""What the live chains let in (pure): `admitted(live, packet)` evaluates the verdict for
a NEW connection to a port, the source addresses (an `AddressSet`) that INPUT -> our chain
-> ... accepts.

The evaluation is symbolic over source addresses and conservative where it cannot know:
a rule with options the parser does not understand (`-m set`, `-d`, negations, `-i eth0`)
is assumed to match when it ACCEPTs and not to match when it DROPs, so an unknown rule can
make a port look more exposed than it is, never less. Packets are taken to arrive on a
network interface (not `lo`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from provision.frozen import frozen
from provision.spans import merge as _merge

from .parse import Chain, LiveFilter, LiveRule
from .rules import Family

BUILTIN = ("INPUT", "FORWARD", "OUTPUT")

Interval = tuple[int, int]


@frozen
class AddressSet:
    """A set of addresses of one family as sorted, disjoint, inclusive integer intervals."""

    family: Family
    spans: tuple[Interval, ...] = ()

    @classmethod
    def everything(cls, family: Family) -> AddressSet:
        return cls(family, ((0, (1 << (32 if family == 4 else 128)) - 1),))

    @classmethod
    def of(cls, family: Family, cidrs: Iterable[str]) -> AddressSet:
        spans = []
        for c in cidrs:
            net = ipaddress.ip_network(c, strict=False)
            if net.version == family:
                spans.append((int(net.network_address), int(net.broadcast_address)))
        return cls(family, _merge(spans))

    def __bool__(self) -> bool:
        return bool(self.spans)

    def __or__(self, other: AddressSet) -> AddressSet:
        return AddressSet(self.family, _merge([*self.spans, *other.spans]))

    def __and__(self, other: AddressSet) -> AddressSet:
        out, i, j = [], 0, 0
        a, b = self.spans, other.spans
        while i < len(a) and j < len(b):
            lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
            if lo <= hi:
                out.append((lo, hi))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return AddressSet(self.family, tuple(out))

    def __sub__(self, other: AddressSet) -> AddressSet:
        out: list[Interval] = []
        for lo, hi in self.spans:
            cur = lo
            for olo, ohi in other.spans:
                if ohi < cur or olo > hi:
                    continue
                if olo > cur:
                    out.append((cur, olo - 1))
                cur = max(cur, ohi + 1)
                if cur > hi:
                    break
            if cur <= hi:
                out.append((cur, hi))
        return AddressSet(self.family, tuple(out))

    def issubset(self, other: AddressSet) -> bool:
        return not (self - other)

    def cidrs(self) -> tuple[str, ...]:
        cls: Any = ipaddress.IPv4Address if self.family == 4 else ipaddress.IPv6Address
        return tuple(str(n) for lo, hi in self.spans
                     for n in ipaddress.summarize_address_range(cls(lo), cls(hi)))


@frozen
class Packet:
    """A NEW connection from the network: protocol and destination port. `dnat` marks one
    Docker DNATed to a published port (evaluated from DOCKER-USER, with --ctorigdstport)."""

    proto: str
    port: int
    dnat: bool = False


def _matches(r: LiveRule, p: Packet) -> bool | None:
    """True/False when the rule certainly does / does not match the packet; None: unknown."""
    rule = r.rule
    if rule.in_iface == "lo":
        return False
    if p.dnat and rule.in_iface in ("docker0", "br-+"):
        return False  # from containers: not our packet
    if rule.proto and rule.proto not in (p.proto, "all"):
        return False
    if rule.icmp_type is not None:
        return False
    if rule.dport is not None and not rule.dport <= p.port <= (rule.dport_to or rule.dport):
        return False
    if rule.ctstate:
        state = "DNAT" if p.dnat else "NEW"
        if state not in rule.ctstate and not (p.dnat and "NEW" in rule.ctstate):
            return False
    if rule.ctorigdstport is not None and (not p.dnat or rule.ctorigdstport != p.port):
        return False
    if r.unknown or (rule.in_iface and rule.in_iface != "lo"):
        return None
    return True


def admitted(live: LiveFilter, packet: Packet, start: str = "INPUT") -> AddressSet:
    """The sources from which `start` (INPUT, or DOCKER-USER for a published port) lets the
    packet through. A missing INPUT chain admits everything (no firewall)."""
    everything = AddressSet.everything(live.family)
    chain = live.chain(start)
    if chain is None:
        return everything
    accepted, rest = _walk(live, chain, everything, packet, depth=0)
    if start in BUILTIN:
        return accepted | rest if (chain.policy or "ACCEPT") == "ACCEPT" else accepted
    return accepted | rest  # DOCKER-USER falls through to Docker's own accepting chains


def _walk(live: LiveFilter, chain: Chain, space: AddressSet, p: Packet,
          depth: int) -> tuple[AddressSet, AddressSet]:
    """(accepted, fell through or returned) for the sources in `space` entering `chain`."""
    accepted = returned = AddressSet(live.family)
    if depth > 16:  # a loop iptables itself would refuse; be safe
        return accepted, space
    for r in chain.rules:
        if not space:
            break
        m = _matches(r, p)
        if m is False:
            continue
        src = AddressSet.of(live.family, [r.rule.source]) if r.rule.source else space
        hit = space & src
        if not hit:
            continue
        t = r.target
        if t == "ACCEPT":
            accepted, space = accepted | hit, space - hit
        elif t in ("DROP", "REJECT"):
            if m:
                space = space - hit
        elif t == "RETURN":
            if m:
                returned, space = returned | hit, space - hit
        elif t in live.chains:
            sub_acc, sub_rest = _walk(live, live.chains[t], hit, p, depth + 1)
            accepted = accepted | sub_acc
            if m:
                space = (space - hit) | sub_rest
        # LOG, MARK, ...: not terminating
    return accepted, space | returned


__all__ = ["AddressSet", "Packet", "admitted"]
