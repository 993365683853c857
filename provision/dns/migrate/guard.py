"""What `dns plan`/`dns apply` must not do to a record by itself: cutovers and reverts.

Pure, no I/O. Before the zone is planned (`records.plan_zone`), `review` looks at each
record whose values the inventory changes and at the migration markers in the zone:

* **a cutover**: the values change and the TTL in the zone now is above the zone's
  ``cutover_above_ttl`` (default 300 s). Caches may keep the old answer for that long,
  so the record is left alone and the plan says to run ``provision dns migrate run
  NAME`` (which takes the target from the inventory). ``--no-migrate`` applies it as a
  plain change, saying how long caches may keep the old value;
* **a revert**: a closed migration's record (`closed`) says the record was moved from
  the values the inventory declares now. Applying that would undo a finished cutover
  (the old server is usually being retired): refused without ``--force``, naming the
  migration. With ``--force`` the record goes back and the closed record is deleted with
  it (the revert is then on purpose, and said);
* **a hostile marker**: a marker that says ``phase=closed`` but does not parse strictly
  (or names another record) is never acted on: the record it sits at is left alone
  and the plan says why;
* **expired**: a closed record past its ``until`` is deleted with the next apply.

`check_findings` is `provision check`'s offline part: closed journals of this machine
whose ``from`` values the inventory still declares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from provision.dns.records import MARKER_TYPE, RRset, absolute, in_zone, relative

from . import closed as C
from .journal import Journal
from .marker import LABEL, marked_name

DEFAULT_CUTOVER_ABOVE_TTL = 300


@dataclass(frozen=True)
class Cutover:
    name: str                   # absolute
    type: str
    old: tuple[str, ...]
    new: tuple[str, ...]
    ttl: int                    # in the zone now: how long caches may keep `old`
    threshold: int


@dataclass(frozen=True)
class Review:
    hold: dict[tuple[str, str], str]        # left alone: (name, type) -> why
    cutovers: tuple[Cutover, ...] = ()      # held for `dns migrate` (not with no_migrate)
    reverts: tuple[str, ...] = ()           # refusals: exit 2 (not with force)
    expire: tuple[RRset, ...] = ()          # closed records to delete
    notes: tuple[str, ...] = ()


def _command(name: str, zone: str) -> str:
    return f"provision dns migrate run {relative(name, zone)}"


def review(zone: str, want: Sequence[RRset], actual: Sequence[RRset], now: float, *,
           cutover_above_ttl: int = DEFAULT_CUTOVER_ABOVE_TTL, force: bool = False,
           no_migrate: bool = False) -> Review:
    origin = absolute("@", zone)
    have = {rr.key: rr for rr in actual}
    hold: dict[tuple[str, str], str] = {}
    cutovers: list[Cutover] = []
    reverts: list[str] = []
    expire: list[RRset] = []
    notes: list[str] = []

    closed: dict[str, C.Closed] = {}
    hostile: dict[str, str] = {}
    open_names: set[str] = set()
    for rr in actual:
        if rr.type != MARKER_TYPE or not rr.name.startswith(LABEL + "."):
            continue
        target = marked_name(rr.name)
        if target is None or not in_zone(target, origin):
            continue
        if not C.claims_closed(rr):
            open_names.add(target)     # an open migration: plan_zone leaves it alone
            continue
        try:
            c = C.parse(rr)
        except C.ClosedError as e:
            hostile[target] = str(e)
            continue
        if c.expired(now):
            expire.append(rr)
        else:
            closed[target] = c

    for w in want:
        a = have.get(w.key)
        if a is None or a.alias is not None or w.name in open_names:
            continue
        if a.values == w.values and a.ttl == w.ttl:
            continue
        where = f"{relative(w.name, origin)} {w.type}"
        if w.name in hostile:
            hold[w.key] = (f"{where}: left alone: its marker {LABEL}.{relative(w.name, origin)} "
                           f"says phase=closed but is malformed ({hostile[w.name]}); provision "
                           "does not act on it: remove it by hand")
            continue
        cw = closed.get(w.name)
        if cw is not None and cw.type == w.type and w.values == cw.from_values \
                and a.values != w.values:
            what = C.describe(cw, now)
            if force:
                notes.append(f"{where}: --force: putting {', '.join(w.values)} back undoes a "
                             f"finished migration ({what}); its closed record goes with it")
                expire.append(_marker_of(actual, w.name))
            else:
                msg = (f"{what}; the inventory still declares {', '.join(w.values)}: update it "
                       f"to {', '.join(cw.to_values)}, or pass --force to put the old value back")
                reverts.append(msg)
                hold[w.key] = f"{where}: refused: {msg}"
            continue
        if a.values != w.values and a.ttl is not None and a.ttl > cutover_above_ttl:
            if no_migrate:
                notes.append(f"{where}: --no-migrate: changed as a plain change; caches may "
                             f"keep the old value ({', '.join(a.values)}) for up to {a.ttl} s "
                             "(the TTL in the zone now)")
                continue
            cutovers.append(Cutover(w.name, w.type, a.values, w.values, a.ttl, cutover_above_ttl))
            hold[w.key] = (f"{where}: a cutover: run `{_command(w.name, origin)}` (ttl {a.ttl} s "
                           f"is above {cutover_above_ttl} s: caches would keep "
                           f"{', '.join(a.values)} that long); dns apply leaves it alone "
                           "(--no-migrate applies it as a plain change)")
    return Review(hold, tuple(cutovers), tuple(reverts), tuple(dict.fromkeys(expire)),
                  tuple(notes))


def _marker_of(actual: Sequence[RRset], name: str) -> RRset:
    return next(rr for rr in actual if rr.type == MARKER_TYPE and marked_name(rr.name) == name
                and rr.name.startswith(LABEL + "."))


# --- check (offline) ------------------------------------------------------------------

def closed_at(j: Journal) -> float | None:
    """When a closed journal was finalized (None: rolled back, or never started)."""
    for t, event in reversed(j.history):
        if event.startswith("closed: "):
            return t if event == "closed: finalized" else None
    return None


def check_findings(inv: Any, journals: Sequence[Journal], now: float) -> list[Any]:
    """`provision check` warnings: a migration finalized on this machine less than its
    zone's ``closed_migration_days`` ago, whose record the inventory still declares with
    the values it was moved away from (`dns apply` would refuse to put them back)."""
    from provision.dns.records import desired
    from provision.exposure import Finding

    zones = {z.name.rstrip(".") + ".": z for z in (inv.dns.zones if inv.dns else ())}
    out = []
    seen: set[tuple[str, str]] = set()
    for j in sorted(journals, key=lambda j: -(closed_at(j) or 0)):
        at = closed_at(j)
        z = zones.get(j.zone)
        if at is None or z is None or (j.name, j.type) in seen:
            continue
        seen.add((j.name, j.type))   # the newest closed migration of a record decides
        if now - at > z.closed_migration_days * 86400:
            continue
        declared = next((rr for rr in desired(z) if rr.key == (j.name, j.type)), None)
        if declared is None or declared.values != j.original_values:
            continue
        by = f" by {j.by}" if j.by else ""
        out.append(Finding(
            "warning", "dns-migration-reverted", f"dns {j.name}",
            f"{j.name} {j.type} was moved {', '.join(j.original_values)} -> "
            f"{', '.join(j.target_values)}{by} {C.ago(now - at)} ago, but the inventory still "
            f"declares {', '.join(j.original_values)}: dns apply refuses to put it back",
            f"set {relative(j.name, j.zone)} to {', '.join(j.target_values)} in the inventory"))
    return out
