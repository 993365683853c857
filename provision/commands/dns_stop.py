"""What Ctrl-C says during `dns apply` (pure words over `Zones`; the handler is
`provision.interrupt`'s).

Each zone goes out as one change set, which every provider applies whole or not at all
(PowerDNS's PATCH, an RFC 2136 UPDATE, a Route 53 change batch, a Cloud DNS change): the
first Ctrl-C lets the zone in flight finish (sent and waited for until served) and starts
no other; the second leaves at once, and the zone in flight has all of its change set or
none of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from provision.text import printable

NOT_APPLIED = "not applied (Ctrl-C)"  # a zone's recap status when Ctrl-C came before it


@dataclass
class Zones:
    """Where `dns apply` stands: the zone in flight (its name, or ""), and those to come."""

    current: str = ""
    waiting: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)


def _zones(n: int) -> str:
    return f"{n} zone{'s' if n != 1 else ''}"


def stopping_line(z: Zones) -> str:
    """What the first Ctrl-C says at once."""
    busy = (f"1 zone finishing ({printable(z.current)}: its change set is sent and waited "
            "for until served)") if z.current else "no zone in flight"
    return (f"stopping: {busy}, {_zones(len(z.waiting))} not started "
            "(Ctrl-C again to leave at once)")


def leaving_lines(z: Zones) -> list[str]:
    """What the second Ctrl-C says before the process ends."""
    if not z.current:
        return ["leaving now: no zone was being changed"]
    return ["leaving now; what may be half-way:",
            f"  {printable(z.current)}: its change set is one atomic change, so the provider "
            "has all of it or none of it (it may not be served everywhere yet); "
            "`provision dns plan` shows which"]


def interrupted_line(applied: list[str], failed: list[str], skipped: list[str]) -> str:
    """The last line after the first Ctrl-C: which zones were applied, which were not."""
    parts = [f"applied {', '.join(map(printable, applied))}" if applied else "no zone applied"]
    if failed:
        parts.append(f"failed {', '.join(map(printable, failed))}")
    if skipped:
        parts.append(f"not applied {', '.join(map(printable, skipped))}")
    again = "; run dns apply again to finish" if skipped or failed else ""
    return f"interrupted (Ctrl-C): {'; '.join(parts)}{again}"
