"""Fact: the holds provision set (its record, with dpkg's selection for each) and what apt
makes of our version pins (`apt-cache policy` of the pinned packages). Pure parser.

Records: `pinrec NAME STATUS` (a name in /var/lib/provision/apt-holds and dpkg's status
for it, `hold ok installed` when held; `-` when dpkg does not know it), `pinpol NAME
INSTALLED CANDIDATE` (`(none)`: nothing), `pinver NAME VERSION PRIORITY` (each version
apt knows, with the priority our pin gives it: 1001 where it matches).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from provision.frozen import frozen

from .spec import FactsError, FactSpec, Rec, as_int


@frozen
class Policy:
    installed: str | None
    candidate: str | None
    versions: dict[str, int] = field(default_factory=dict)  # version -> priority


@frozen
class AptPins:
    recorded: dict[str, bool] = field(default_factory=dict)  # our record: name -> held now
    policies: dict[str, Policy] = field(default_factory=dict)


def _none(v: str) -> str | None:
    return None if v in ("(none)", "", "-") else v


def parse(records: Sequence[Rec]) -> AptPins:
    recorded: dict[str, bool] = {}
    pols: dict[str, tuple[str | None, str | None]] = {}
    versions: dict[str, dict[str, int]] = {}
    for r in records:
        f = r.fields
        if len(f) < 2 or (r.kind != "pinrec" and len(f) < 3):
            raise FactsError(f"line {r.line}: a {r.kind} record needs more fields")
        if r.kind == "pinrec":
            recorded[f[0]] = f[1].startswith("hold ")
        elif r.kind == "pinpol":
            pols[f[0]] = (_none(f[1]), _none(f[2]))
        elif r.kind == "pinver":
            versions.setdefault(f[0], {})[f[1]] = as_int(f[2].lstrip("-"), r, "priority") * (
                -1 if f[2].startswith("-") else 1)
    return AptPins(recorded, {n: Policy(i, c, versions.get(n, {})) for n, (i, c) in pols.items()})


SPEC = FactSpec("apt_pins", ("pinrec", "pinpol", "pinver"), parse)
