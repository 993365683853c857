"""Host ports of per-user servers (pure): each member's port is a function of their name.

A member's port is `low + sha256(name) mod (high - low + 1)` unless the inventory pins it.
It depends on nothing but the name and the range, so adding or removing a member never
moves anybody else's port, and `check`, `render` and `tunnel` all know it without asking
the host. The price is that two names may land on one port: that is an error naming both
and a free port to pin one of them to (the newcomer, so nobody moves), never a silent
shuffle. A range smaller than the members is an error too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from provision.frozen import frozen

DEFAULT_RANGE = (20000, 29999)  # no catalog service lives there


@frozen
class PortClash:
    """Why the members' ports cannot be given out; `member` is the one to fix."""

    member: str
    message: str


def hashed_port(name: str, low: int, high: int) -> int:
    """The port `name` gets in [low, high] when it is not pinned."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return low + digest % (high - low + 1)


def allocate(members: Sequence[str], pins: Mapping[str, int], low: int,
             high: int) -> tuple[dict[str, int], list[PortClash]]:
    """Each member's port, and the clashes (empty when every member has a port of their own).

    `pins`: ports the inventory gives explicitly (anywhere, not only in the range). A clash
    with another service of the host is `check`'s finding (`port-clash`), as for any two
    services.
    """
    size = high - low + 1
    unpinned = [m for m in members if m not in pins]
    if len(unpinned) > size:
        return {}, [PortClash(unpinned[size], f"{len(unpinned)} members need a port but "
                              f"per_user_ports {low}-{high} holds {size}: widen the range")]
    ports = {m: pins.get(m, hashed_port(m, low, high)) for m in members}
    owner: dict[int, str] = {}
    clashes: list[PortClash] = []
    # pinned members first: a pin is a decision, a hashed port only a default
    for m in sorted(members, key=lambda m: (m not in pins, members.index(m))):
        p = ports[m]
        other = owner.get(p)
        if other is None:
            owner[p] = m
            continue
        used = set(owner) | set(ports.values())
        free = next((q for q in range(low, high + 1) if q not in used), None)
        if other in pins and m not in pins:
            # the pin is what to move: the member whose port comes from their name keeps it
            blame, what = other, f"{other}'s pinned port {p} is {m}'s port (from the name)"
        elif m in pins:
            blame, what = m, f"{m}'s pinned port {p} is also {other}'s pinned port"
        else:
            blame, what = m, f"{m}'s port {p} is also {other}'s (both come from the names)"
        fix = (f"pin {blame} to a free one, e.g. {{{blame}: {{port: {free}}}}}" if free is not None
               else f"no port of {low}-{high} is free: widen per_user_ports")
        clashes.append(PortClash(blame, f"{what}; {fix}"))
    return ports, clashes
