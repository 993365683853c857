"""Fact: apt's package lists (present, when refreshed) and the candidates of wanted packages
that are not installed (`P:` arguments). Pure parser.

Records: `aptlists N` (index files under /var/lib/apt/lists), `aptstamp EPOCH` (when the
lists were last refreshed: provision's own stamp, or apt's update-success-stamp), `aptnow
EPOCH` (the host's clock, so the age needs no clock of ours), `aptgpg yes|no` (gpg is there
to check a signing key), `cand NAME VERSION` (`(none)`: known but nothing installable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from provision.frozen import frozen

from .spec import FactSpec, Rec, as_int


@frozen
class Apt:
    lists: int = 0
    refreshed: int | None = None  # epoch seconds of the last refresh we can tell, or None
    now: int = 0
    gpg: bool = False
    candidates: dict[str, str] = field(default_factory=dict)  # name -> version (never "(none)")

    @property
    def age(self) -> int | None:
        """Seconds since the lists were last refreshed (None: unknown)."""
        return None if self.refreshed is None else max(0, self.now - self.refreshed)

    def candidate(self, package: str) -> str | None:
        return self.candidates.get(package)


def parse(records: Sequence[Rec]) -> Apt:
    lists, stamps, now, gpg = 0, [], 0, False
    candidates: dict[str, str] = {}
    for r in records:
        f = r.fields
        if r.kind == "aptlists":
            lists = as_int(f[0], r, "number of package lists")
        elif r.kind == "aptstamp":
            stamps.append(as_int(f[0], r, "stamp time"))
        elif r.kind == "aptnow":
            now = as_int(f[0], r, "time")
        elif r.kind == "aptgpg":
            gpg = f[0] == "yes"
        elif r.kind == "cand" and len(f) >= 2 and f[1] not in ("(none)", ""):
            candidates[f[0]] = f[1]
    return Apt(lists, max(stamps) if stamps else None, now, gpg, candidates)


SPEC = FactSpec("apt", ("aptlists", "aptstamp", "aptnow", "aptgpg", "cand"), parse)
