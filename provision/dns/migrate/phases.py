"""The phase machine of a migration: pure functions over the journal, the zone and now.

Pure, no I/O. The shell reads three things — the journal file (maybe missing), the
record and its marker from the provider (a `ZoneView`), and what each authoritative
server and resolver answers (`propagation.Answer`s) — and asks this module:

* `reconcile`: what is true now? A journal intent whose change is found in the zone
  was applied (the process died before the next journal write); one whose change is not
  there never was; a marker without a journal (another machine, a lost file) rebuilds the
  journal; a record changed by someone else is a conflict that only `rollback` may
  resolve;
* `change_to`: the one atomic change (record + marker, exact old RRsets as
  prerequisites) that moves the zone to a state;
* `cutover_gate`, `served`, `verify`, `notes`: when a cutover is allowed, whether every
  authoritative server serves a state (values *and* TTL, AA set), whether resolvers have
  the new values, and what their answers mean (stale caches with their remaining TTL,
  TTLs clamped upward, negative caching).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from provision.dns.propagation import Answer
from provision.dns.rrset import RRset, relative, rrset
from provision.dns.zone_plan import ChangeSet
from provision.finding import Finding
from provision.frozen import frozen

from . import closed as C
from .journal import Journal, Snapshot
from .marker import Marker, MarkerPhase, marker_rrset, parse

StateName = Literal["original", "lowered", "switched", "finalized"]


@frozen
class ZoneView:
    """The migrating record and its marker as the provider has them now."""

    record: RRset | None
    marker_rr: RRset | None
    closed_rr: RRset | None = None   # the closed record of this name and type (as read)

    @property
    def marker(self) -> Marker | None:
        return None if self.marker_rr is None else parse(self.marker_rr)

    @property
    def closed(self) -> C.Closed | None:
        """The closed migration's record of this record (well-formed), or None. It is
        no open migration: it has an owner name of its own (`closed.closed_name`)."""
        if self.closed_rr is None:
            return None
        try:
            return C.parse(self.closed_rr)
        except C.ClosedError:
            return None

    @property
    def marker_free(self) -> bool:
        """No open (or unreadable) marker."""
        return self.marker_rr is None

    def snapshot(self) -> Snapshot:
        r, m = self.record, self.marker_rr
        return Snapshot(None if r is None else r.values, None if r is None else r.ttl,
                        None if m is None else m.values, None if m is None else m.ttl)

    def describe(self) -> str:
        rec = "absent" if self.record is None else self.record.describe()
        mk = self.marker
        return rec + (f", marker phase {mk.phase}" if mk else
                      (", an unreadable marker" if self.marker_rr is not None else ", no marker"))


@frozen
class State:
    """A state of the zone: the record's values and TTL, and the marker's phase."""

    name: StateName
    values: tuple[str, ...]
    ttl: int
    marker: MarkerPhase | None


def state(j: Journal, name: StateName) -> State:
    if name == "original":
        return State(name, j.original_values, j.original_ttl, None)
    if name == "lowered":
        return State(name, j.original_values, j.lower_ttl, "lowered")
    if name == "switched":
        return State(name, j.target_values, j.lower_ttl, "switched")
    return State(name, j.target_values, j.final_ttl or j.original_ttl, None)


def matches(view: ZoneView, s: State) -> bool:
    r = view.record
    if r is None or r.alias is not None or r.values != s.values or r.ttl != s.ttl:
        return False
    mk = view.marker
    if s.marker is None:
        return view.marker_free
    return mk is not None and mk.phase == s.marker


# intent -> (state before the change, state after it)
_INTENT: dict[str, tuple[StateName, StateName]] = {
    "lowering": ("original", "lowered"), "switching": ("lowered", "switched"),
    "finalizing": ("switched", "finalized"), "rolling-back": ("switched", "original"),
}


@frozen
class Reconciled:
    journal: Journal | None          # the migration as it stands (None: none is open)
    changed: bool = False            # the journal file must be rewritten
    closed: str = ""                 # "finalized" | "rolled back" | "never started": archive it
    needs_served: bool = False       # a change was found applied: wait until served, stamp the time
    conflict: str = ""               # the zone is in no state this migration explains
    notes: tuple[str, ...] = ()
    source: Literal["none", "journal", "marker"] = "none"

    @property
    def open(self) -> bool:
        return self.journal is not None and not self.closed


def from_marker(name: str, zone: str, provider: str, m: Marker) -> Journal:
    j = Journal(name=name, type=m.type, zone=zone, provider=provider,
                original_values=m.original_values, original_ttl=m.original_ttl,
                target_values=m.target_values, lower_ttl=m.lower_ttl, phase=m.phase,
                started_at=m.started_at, by=m.by,
                history=((m.at, f"rebuilt from the zone's marker (phase {m.phase})"),))
    if m.phase == "lowered":
        return replace(j, lowered_at=m.at)
    return replace(j, switched_at=m.at)


def reconcile(j: Journal | None, view: ZoneView, *, name: str, zone: str, provider: str,
              now: float) -> Reconciled:
    """What is true now, from the journal (None if this machine has none) and the zone."""
    mk = view.marker
    where = relative(name, zone)
    if j is None:
        if view.marker_free:
            return Reconciled(None)
        assert view.marker_rr is not None
        if mk is None:
            why = (f": it says phase=closed, but a closed migration's record has a name of "
                   f"its own ({C.closed_name(name, '<type>')})"
                   if C.claims_closed(view.marker_rr) else "")
            return Reconciled(None, conflict=f"{where} has a migration marker provision cannot "
                              f"read{why} ({', '.join(view.marker_rr.values)[:400]}); nothing "
                              "is done to this record until it is removed by hand")
        try:  # what a rollback would write back: never values provision would not write
            C.check_values(mk.type, mk.original_values, "from")
            C.check_values(mk.type, mk.target_values, "to")
        except C.ClosedError as e:
            return Reconciled(None, conflict=f"{where} has a migration marker provision cannot "
                              f"read: {e}; nothing is done to this record until it is removed "
                              "by hand")
        rebuilt = from_marker(name, zone, provider, mk)
        note = ("no journal on this machine: rebuilt from the zone's marker (its times are "
                "when each change was written, to the second)")
        if not matches(view, state(rebuilt, mk.phase)):
            return Reconciled(rebuilt, True, conflict=_conflict(rebuilt, view, mk.phase),
                              notes=(note,), source="marker")
        return Reconciled(rebuilt, True, notes=(note,), source="marker")

    if j.phase in _INTENT:
        before, after = _INTENT[j.phase]
        if j.phase == "rolling-back":
            if matches(view, state(j, "original")):
                return Reconciled(j, closed="rolled back", needs_served=True, source="journal",
                                  notes=("the rollback was applied; the journal's last write "
                                         "did not happen (interrupted)",))
            return Reconciled(j, source="journal",
                              notes=("a rollback was interrupted before its change was "
                                     "applied: run rollback again",))
        if matches(view, state(j, after)):
            note = (f"the {j.phase.replace('ing', '')} change was applied but the journal was "
                    "not updated after it (interrupted): taken as applied")
            if after == "finalized":
                return Reconciled(j, closed="finalized", needs_served=True, notes=(note,),
                                  source="journal")
            stamp = {"lowered": {"lowered_at": None}, "switched": {"switched_at": None}}[after]
            return Reconciled(j.at("lowered" if after == "lowered" else "switched", now,
                                   f"{after} (found in the zone after an interruption)", **stamp),
                              True, needs_served=True, notes=(note,), source="journal")
        if matches(view, state(j, before)):
            note = f"an interrupted {j.phase} never reached the zone: nothing was changed"
            if before == "original":
                return Reconciled(j, closed="never started", notes=(note,), source="journal")
            back = "verified" if before == "switched" and j.verified_at else before
            return Reconciled(j.at(back, now, f"{j.phase} not applied"), True,  # type: ignore[arg-type]
                              notes=(note,), source="journal")
        return Reconciled(j, conflict=_conflict(j, view, after), source="journal")

    # a stable phase
    want: StateName = "lowered" if j.phase == "lowered" else "switched"
    if matches(view, state(j, want)):
        return Reconciled(j, source="journal")
    if mk is not None and mk.target_values == j.target_values and mk.phase == "switched" \
            and want == "lowered" and matches(view, state(j, "switched")):
        return Reconciled(j.at("switched", now, "switched from another machine (the zone's marker)",
                               switched_at=mk.at), True, source="journal",
                          notes=("the zone says the cutover happened (from another machine): "
                                 "journal updated",))
    if view.marker_free and matches(view, state(j, "original")):
        return Reconciled(j, closed="rolled back", source="journal",
                          notes=("the zone holds the original record and no marker: the "
                                 "migration was rolled back elsewhere",))
    if view.marker_free and view.record is not None and \
            view.record.values == j.target_values and j.phase != "lowered":
        return Reconciled(j, closed="finalized", source="journal",
                          notes=("the zone holds the new values and no marker: the migration "
                                 "was finalized elsewhere",))
    return Reconciled(j, conflict=_conflict(j, view, want), source="journal")


def _conflict(j: Journal, view: ZoneView, want: StateName) -> str:
    s = state(j, want)
    return (f"{relative(j.name, j.zone)} {j.type} changed outside this migration: the zone has "
            f"{view.describe()}, the migration expects {', '.join(s.values)} ttl {s.ttl}"
            f"{f', marker phase {s.marker}' if s.marker else ', no marker'}; only "
            "`rollback` (which restores the original record) may proceed")


def change_to(j: Journal, view: ZoneView, target: StateName, now: float, *, by: str = "",
              keep: float = C.DEFAULT_KEEP) -> ChangeSet:
    """The atomic change from what was read (`view`, exact: the prerequisites) to
    `target`: the record, and the marker written, rewritten or deleted with it. Finalizing
    deletes the marker and leaves a closed migration's record (`closed`) for `keep` seconds
    (none when 0), saying who (`by`) moved the record when; rolling back leaves the
    record's closed record (from an earlier migration) as it is."""
    s = state(j, target)
    deletions = [rr for rr in (view.record, view.marker_rr) if rr is not None]
    additions: list[RRset] = [rrset(j.name, j.type, s.ttl, s.values)]
    if s.marker is not None:
        additions.append(marker_rrset(j.name, Marker(
            s.marker, j.type, j.original_ttl, j.lower_ttl, j.started_at, now,
            j.original_values, j.target_values, j.by)))
    elif target == "finalized" and keep > 0:
        c = C.Closed(j.name, j.type, now, now + min(keep, C.MAX_KEEP),
                     by or j.by or "unknown@unknown", j.original_values, j.target_values)
        # an earlier closed record of this record is replaced (exact, as read), its old
        # values still in force carried over; a malformed one is replaced by the truth
        if view.closed_rr is not None:
            deletions.append(view.closed_rr)
        additions.append(C.closed_rrset(C.merged(view.closed, c, now, keep)))
    return ChangeSet(tuple(deletions), tuple(additions))


# --- timing -------------------------------------------------------------------------

@frozen
class Gate:
    ok: bool
    wait: float          # seconds until the old TTL has run out everywhere (0 when past)
    message: str


def cutover_gate(j: Journal, now: float, force: bool) -> Gate:
    ready = j.cutover_ready_at
    where = relative(j.name, j.zone)
    if ready is None:
        return Gate(False, 0.0, f"{where}: the lowered TTL was never confirmed served; "
                    "run status, then start again or rollback")
    left = max(0.0, ready - now)
    if left <= 0:
        return Gate(True, 0.0, "")
    if force:
        return Gate(True, left, f"--force: caches may still serve the old value "
                    f"({', '.join(j.original_values)}) for up to {left:.0f} s (they may hold it "
                    f"for the original TTL, {j.original_ttl} s, from when the lowered TTL was "
                    "served)")
    return Gate(False, left, f"{where}: cutover refused: caches may hold the old answer for "
                f"{left:.0f} s more (original TTL {j.original_ttl} s since the lowered TTL was "
                "served everywhere); wait, or pass --force")


# --- answers ------------------------------------------------------------------------

def served(answers: Sequence[Answer], values: tuple[str, ...], ttl: int) -> tuple[bool, list[str]]:
    """Every authoritative answer carries AA, exactly `values`, and TTL `ttl`."""
    out = []
    auth = [a for a in answers if a.target.role == "authoritative"]
    for a in auth:
        if a.status != "NOERROR" or not a.aa or a.values != values or a.ttl != ttl:
            got = ", ".join(a.values) if a.values else (a.error or a.status)
            out.append(f"{a.target.label} answers {got} ttl {a.ttl}"
                       f"{'' if a.aa else ' (not authoritative)'}; expected "
                       f"{', '.join(values)} ttl {ttl}")
    return not out, out


@frozen
class Stale:
    server: str
    values: tuple[str, ...]
    ttl: int | None       # its remaining TTL
    status: str


@frozen
class Verification:
    ok: bool
    authoritative_ok: bool
    stale: tuple[Stale, ...]
    notes: tuple[str, ...]


def verify(j: Journal, answers: Sequence[Answer], now: float) -> Verification:
    """After a cutover: every authoritative server serves the new values with the lowered
    TTL; every resolver serves the new values. Stale resolvers are named."""
    auth_ok, problems = served(answers, j.target_values, j.lower_ttl)
    notes = list(problems)
    auth = [a for a in answers if a.target.role == "authoritative"]
    if not auth:
        notes.append("no authoritative server was asked (a private zone's never are; a "
                      "public zone's addresses are unknown: list a resolver under "
                      "dns.resolvers); the provider's own in-sync status was taken instead")
        auth_ok = True
    stale: list[Stale] = []
    for a in answers:
        if a.target.role != "resolver":
            continue
        if a.status == "NOERROR" and a.values == j.target_values:
            continue
        stale.append(Stale(a.target.label, a.values, a.ttl if a.values else a.negative_ttl,
                           a.status))
    until = j.stale_until
    for s in stale:
        got = ", ".join(s.values) if s.values else s.status
        line = f"resolver {s.server} still answers {got}"
        if s.ttl is not None:
            line += f" for up to {s.ttl} s more (its remaining TTL)"
        if until is not None and now < until:
            line += f"; expected until the cutover's TTL window ends in {until - now:.0f} s"
        elif until is not None:
            line += "; past the TTL window: it keeps answers longer than published"
        notes.append(line)
    notes += [n for n in resolver_notes(j, answers) if n not in notes]
    return Verification(auth_ok and not stale, auth_ok, tuple(stale), tuple(notes))


def resolver_notes(j: Journal, answers: Sequence[Answer]) -> list[str]:
    """TTLs clamped upward; negative caching."""
    out = []
    for a in answers:
        if a.target.role != "resolver":
            continue
        if a.status == "NOERROR" and a.ttl is not None and a.values:
            published = max(j.original_ttl, j.lower_ttl) if a.values == j.original_values else \
                max(j.lower_ttl, j.final_ttl or 0)
            if a.ttl > published:
                out.append(f"resolver {a.target.label} reports TTL {a.ttl} for "
                           f"{', '.join(a.values)}, above the {published} s ever published: "
                           "it clamps TTLs upward (e.g. Unbound cache-min-ttl), so it may "
                           f"serve an old value up to {a.ttl} s after a change")
        if a.status in ("NXDOMAIN", "NODATA"):
            neg = f" for up to {a.negative_ttl} s" if a.negative_ttl is not None else ""
            out.append(f"resolver {a.target.label} answers {a.status}: it cached that the name "
                       f"has no such record (negative caching, the zone's SOA minimum) and "
                       f"keeps that{neg}, whatever the zone says now")
    return out


def time_left(j: Journal, now: float) -> tuple[str, float | None]:
    """(what is being waited for, seconds left) in the current phase."""
    if j.phase in ("lowering", "lowered"):
        ready = j.cutover_ready_at
        return ("the old TTL runs out everywhere (cutover allowed)",
                None if ready is None else max(0.0, ready - now))
    until = j.stale_until
    if j.phase in ("switching", "switched", "verified"):
        return ("every cache has the new value", None if until is None else max(0.0, until - now))
    return ("", None)


def next_step(r: Reconciled, now: float) -> str:
    j = r.journal
    if j is None:
        return ""
    where = relative(j.name, j.zone)
    if r.conflict:
        return f"provision dns migrate rollback {where}"
    if r.closed:
        return ""
    if j.phase in ("lowering", "lowered"):
        _, left = time_left(j, now)
        if left:
            return f"wait {left:.0f} s, then provision dns migrate cutover {where}"
        return f"provision dns migrate cutover {where} --health …"
    if j.phase in ("switching", "switched"):
        return f"provision dns migrate verify {where}"
    if j.phase in ("verified", "finalizing"):
        return f"provision dns migrate finalize {where}"
    return f"provision dns migrate rollback {where}"


# --- check (offline) ------------------------------------------------------------------

def overdue(journals: Sequence[Journal], now: float, limit: float = 86400.0) -> list[Journal]:
    """Open migrations started more than `limit` seconds ago (for `provision check`)."""
    return [j for j in journals if now - j.started_at > limit]


def overdue_findings(journals: Sequence[Journal], now: float,
                     limit: float = 86400.0) -> list[Finding]:
    """`provision check` warnings for open migrations older than `limit` seconds."""
    out = []
    for j in overdue(journals, now, limit):
        where = relative(j.name, j.zone)
        age = (now - j.started_at) / 86400
        out.append(Finding(
            "warning", "dns-migration-open", f"dns {j.name}",
            f"a migration of {j.name} {j.type} has been open for {age:.1f} days (phase "
            f"{j.phase}; TTL held at {j.lower_ttl} s instead of {j.original_ttl} s)",
            f"provision dns migrate status {where}; then finalize or rollback"))
    return out
