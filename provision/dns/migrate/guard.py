"""What `dns plan`/`dns apply` must not do to a record by itself: cutovers and reverts.

Pure, no I/O. Before the zone is planned (`zone_plan.plan_zone`), `review` looks at each
record whose values the inventory changes and at the migration markers in the zone:

* **a cutover**: the values change and the TTL in the zone now is above the zone's
  ``cutover_above_ttl`` (default 300 s). Caches may keep the old answer for that long,
  so the record is left alone and the plan says to run ``provision dns migrate run
  NAME`` (which takes the target from the inventory). ``--no-migrate`` applies it as a
  plain change, saying how long caches may keep the old value;
* **a revert**: a closed migration's record (`closed`, one per name and type) says the
  record was moved away from a value the inventory declares now (any of them: a subset
  or a superset of the old values is a revert too). Applying that would undo a finished
  cutover (the old server is usually being retired): refused without ``--allow-revert
  NAME`` (``--force`` is the 30 % guard's and does not do this), naming the migration.
  Allowed, the record goes back and the closed record is deleted with it (said);
* **a hostile marker**: a closed record that does not parse strictly (names another
  record, is dated in the future, ...) or a migration marker that is no open migration
  provision can read: never acted on, the record it covers is left alone, and it is an
  error (`errors`: plan and apply exit 2, after applying the rest);
* **a type change** (A/AAAA <-> CNAME) of a record whose TTL in the zone is above
  ``cutover_above_ttl``: held like a cutover (both types), though `dns migrate` cannot do
  it: the plan says to lower the TTL first (``--no-migrate`` applies it);
* **expired**: a closed record past its ``until`` (or its zone's ``closed_migration_days``
  after its ``at``, if sooner) is deleted with the next apply.

`check_findings` is `provision check`'s offline part: closed journals of this machine
whose ``from`` values the inventory still declares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from provision.dns.markers import MARKER_TYPE
from provision.dns.rrset import RRset, absolute, desired, in_zone, relative
from provision.dnsdata.rdata import MIGRATE_TYPES
from provision.finding import Finding
from provision.frozen import frozen

from . import closed as C
from .journal import Journal
from .marker import LABEL, marked_name
from .marker import parse as parse_marker

if TYPE_CHECKING:
    from provision.inventory.model import Inventory

DEFAULT_CUTOVER_ABOVE_TTL = 300


@frozen
class Cutover:
    name: str                   # absolute
    type: str
    old: tuple[str, ...]
    new: tuple[str, ...]
    ttl: int                    # in the zone now: how long caches may keep `old`
    threshold: int
    old_type: str = ""          # a type change (A -> CNAME): the type in the zone now


@frozen
class Review:
    hold: dict[tuple[str, str], str]        # left alone: (name, type) -> why
    cutovers: tuple[Cutover, ...] = ()      # held for `dns migrate` (not with no_migrate)
    reverts: tuple[str, ...] = ()           # refusals: exit 2 (not with force)
    expire: tuple[RRset, ...] = ()          # closed records to delete
    notes: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()            # bad markers in the zone: exit 2
    bad: tuple[tuple[str, str], ...] = ()   # the records they hold (in `hold`)


def _command(name: str, zone: str) -> str:
    return f"provision dns migrate run {relative(name, zone)}"


def review(zone: str, want: Sequence[RRset], actual: Sequence[RRset], now: float, *,
           cutover_above_ttl: int = DEFAULT_CUTOVER_ABOVE_TTL,
           allow_revert: frozenset[str] = frozenset(), no_migrate: bool = False,
           closed_migration_days: float = C.DEFAULT_KEEP / 86400) -> Review:
    origin = absolute("@", zone)
    keep = closed_migration_days * 86400.0
    have = {rr.key: rr for rr in actual}
    hold: dict[tuple[str, str], str] = {}
    cutovers: list[Cutover] = []
    reverts: list[str] = []
    errors: list[str] = []
    bad: list[tuple[str, str]] = []
    expire: list[RRset] = []
    notes: list[str] = []

    closed: dict[tuple[str, str], tuple[C.Closed, RRset]] = {}
    hostile: dict[tuple[str, str], str] = {}      # a bad closed record: its record
    unreadable: dict[str, str] = {}               # a bad migration marker: every type
    open_names: set[str] = set()
    for rr in actual:
        if rr.type != MARKER_TYPE:
            continue
        if rr.name.startswith(LABEL + "."):
            target = marked_name(rr.name)
            if target is None or not in_zone(target, origin):
                continue
            if not _readable(rr):
                unreadable[target] = (f"{LABEL}.{relative(target, origin)} is a migration marker "
                                      "provision cannot read ("
                                      + ", ".join(rr.values)[:200] + ")")
            else:
                open_names.add(target)     # an open migration: plan_zone leaves it alone
            continue
        covered = C.closed_covered(rr.name)
        if covered is None or not in_zone(covered[0], origin):
            continue
        try:
            c = C.parse(rr)
            live = C.in_force(c, now, keep)
        except C.ClosedError as e:
            hostile[covered] = str(e)
            continue
        if not live:
            expire.append(rr)
        else:
            closed[covered] = (c, rr)

    for key, why in hostile.items():
        errors.append(f"{relative(C.closed_name(*key), origin)} says phase=closed but is "
                      f"malformed ({why}); {relative(key[0], origin)} {key[1]} is left alone: "
                      "remove it by hand")
    for name, why in unreadable.items():
        errors.append(f"{why}; {relative(name, origin)} is left alone: remove it by hand")

    want_keys = {w.key for w in want}
    for w in want:
        if w.type not in MIGRATE_TYPES:
            continue  # TXT, MX, SRV, CAA: no cutover, no migration; plain changes
        a = have.get(w.key)
        if a is None:
            if w.name in open_names or w.name in unreadable:
                continue
            # a type change (A/AAAA <-> CNAME): the record in the zone goes, and caches keep
            # it for its TTL; `dns migrate` moves values, not types, so it is only held
            for t in MIGRATE_TYPES:
                o = have.get((w.name, t))
                if o is None or (w.name, t) in want_keys or o.alias is not None or \
                        o.ttl is None or o.ttl <= cutover_above_ttl or \
                        (w.type != "CNAME" and t != "CNAME") or no_migrate:
                    continue
                cutovers.append(Cutover(w.name, w.type, o.values, w.values, o.ttl,
                                        cutover_above_ttl, old_type=t))
                msg = (f"{relative(w.name, origin)}: a type change {t} -> {w.type} (ttl {o.ttl} s "
                       f"is above {cutover_above_ttl} s: caches would keep {', '.join(o.values)} "
                       f"that long); dns migrate moves values, not types: first declare the "
                       f"{t} record with a TTL of at most {cutover_above_ttl} s and apply that, "
                       "change the type once the old TTL has run out; or apply it with "
                       "--no-migrate")
                hold[w.key] = hold[(w.name, t)] = msg
                break
            continue
        if a.alias is not None or w.name in open_names:
            continue
        if a.values == w.values and a.ttl == w.ttl:
            continue
        where = f"{relative(w.name, origin)} {w.type}"
        if w.key in hostile or w.name in unreadable:
            why = (f"its closed record says phase=closed but is malformed ({hostile[w.key]})"
                   if w.key in hostile else unreadable[w.name])
            hold[w.key] = f"{where}: left alone: {why}; provision does not act on it"
            bad.append(w.key)
            continue
        cw = closed.get(w.key)
        back = sorted(set(w.values) & (set(cw[0].from_values) - set(cw[0].to_values))) \
            if cw is not None else []
        if cw is not None and back and a.values != w.values:
            c, crr = cw
            what = C.describe(c, now)
            short = relative(w.name, origin)
            if w.name in allow_revert:
                notes.append(f"{where}: --allow-revert: putting {', '.join(back)} back undoes a "
                             f"finished migration ({what}); its closed record goes with it")
                expire.append(crr)
            else:
                msg = (f"{what}; the inventory still declares {', '.join(w.values)}: if this "
                       f"migration is genuine, update the inventory to "
                       f"{', '.join(c.to_values)}; or pass --allow-revert {short} to put "
                       f"{', '.join(back)} back")
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
                  tuple(notes), tuple(errors), tuple(bad))


def _readable(rr: RRset) -> bool:
    """An open migration's marker provision could have written (values included: a
    rollback writes its ``from`` values back)."""
    mk = parse_marker(rr)
    if mk is None:
        return False
    try:
        C.check_values(mk.type, mk.original_values, "from")
        C.check_values(mk.type, mk.target_values, "to")
    except C.ClosedError:
        return False
    return True


# --- check (offline) ------------------------------------------------------------------

def closed_at(j: Journal) -> float | None:
    """When a closed journal was finalized (None: rolled back, or never started)."""
    for t, event in reversed(j.history):
        if event.startswith("closed: "):
            return t if event == "closed: finalized" else None
    return None


def check_findings(inv: Inventory, journals: Sequence[Journal], now: float) -> list[Finding]:
    """`provision check` warnings: a migration finalized on this machine less than its
    zone's ``closed_migration_days`` ago, whose record the inventory still declares with
    the values it was moved away from (`dns apply` would refuse to put them back)."""
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
