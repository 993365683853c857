"""Which hosted zone a declared zone means, when a public and private zones share its name.

Pure, no I/O. A zone is public (the internet's resolvers see it) or private (only the
resolvers inside the networks it is attached to see it: Route53 VPCs, Cloud DNS
networks). A provider shell reads the zones of that name (or the one zone an id names)
as `Found`s and asks `choose` which one the inventory means; `choose` raises
`ZoneMismatch` (bad input, exit 2) when what exists differs from what is declared, and
returns a plain problem (exit 1: an operation to do first) when there is no such zone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from provision.errors import UsageError
from provision.frozen import frozen

Visibility = Literal["public", "private"]
VISIBILITIES: tuple[Visibility, ...] = ("public", "private")


class ZoneMismatch(UsageError):
    """The zone that exists is not the zone the inventory declares (its visibility, or
    the networks that see it): bad input, found before anything is changed (exit 2)."""


@frozen
class Wanted:
    """A declared zone: its visibility and, private, the networks that must see it
    (labels such as 'vpc-0abc in eu-west-1' or 'projects/p/global/networks/n')."""

    visibility: Visibility = "public"
    networks: frozenset[str] = frozenset()


@frozen
class Found:
    """A zone as the provider describes it."""

    id: str
    private: bool
    networks: frozenset[str] = frozenset()   # private: the networks it is attached to


def _list(labels: frozenset[str]) -> str:
    return ", ".join(sorted(labels)) or "none"


def _describe(f: Found) -> str:
    return f"{f.id} (attached to {_list(f.networks)})" if f.private else f"{f.id} (public)"


def choose(zone: str, want: Wanted, found: Sequence[Found], *,
           kind: str = "hosted zone", by_id: bool = False) -> str:
    """The id of the zone `want` means among `found` (the provider's zones named `zone`,
    or, `by_id`, the one zone the inventory names by id). Raises ZoneMismatch when the
    zone exists with another visibility or is not attached to every declared network;
    LookupError (its message for the user) when none or several fit."""
    private = want.visibility == "private"
    same = [f for f in found if f.private == private]
    other = [f for f in found if f.private != private]
    if not private:
        if len(same) == 1:
            return same[0].id
        if len(same) > 1:
            raise LookupError(f"more than one public {kind} named {zone}; set its id in the "
                              "inventory")
        if other:
            raise ZoneMismatch(
                f"{zone}: the inventory declares a public zone, but {kind} "
                f"{', '.join(_describe(f) for f in other)} is private; declare "
                "'visibility: private' and the networks that see it, or name the public zone")
        raise LookupError(f"no {kind} named {zone}")
    seen = [f for f in same if f.networks & want.networks]
    if len(seen) > 1:
        raise LookupError(f"more than one private {kind} named {zone} is attached to "
                          f"{_list(want.networks)}: {', '.join(_describe(f) for f in seen)}; "
                          "set its id in the inventory")
    if len(seen) == 1 or (by_id and same):
        f = (seen or same)[0]
        missing = want.networks - f.networks
        if missing:
            raise ZoneMismatch(f"{zone}: private {kind} {_describe(f)} is not attached to "
                               f"{_list(frozenset(missing))}, which the inventory declares; "
                               "attach it (provision does not change a zone's networks) or "
                               "correct the inventory")
        return f.id
    if same:
        raise ZoneMismatch(f"{zone}: no private {kind} of that name is attached to "
                           f"{_list(want.networks)}, which the inventory declares; there is "
                           f"{', '.join(_describe(f) for f in same)}")
    if other:
        raise ZoneMismatch(f"{zone}: the inventory declares a private zone, but {kind} "
                           f"{', '.join(_describe(f) for f in other)} is public; "
                           "provision does not create zones")
    raise LookupError(f"no private {kind} named {zone} (provision does not create zones)")
