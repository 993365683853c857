"""The imperative shell of `provision dns migrate`: journal files, provider calls, DNS
queries, health checks, sleeps.

I/O. Every decision is `phases`' (pure); this module reads the journal, the record and
its marker, asks the servers, and carries out what was decided. Each zone change goes
the same way (`_change`): journal the intent (fsync), apply one atomic change whose
prerequisites are the exact RRsets read, wait until every authoritative server serves
it (values and TTL, AA set; Route53 INSYNC / Cloud DNS `done` first), then journal the
new phase with the time it was served. A crash anywhere in between is recognised by
`phases.reconcile` on the next command.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from provision.dns import propagation as prop
from provision.dns.markers import foreign
from provision.dns.markers import marker_name as ownership_marker_name
from provision.dns.provider import Provider, ProviderError, StaleRead, provider_for
from provision.dns.rrset import RRset, absolute, desired, relative
from provision.dns.zone_plan import ChangeSet
from provision.dnsdata import names
from provision.dnsdata.rdata import values_problem
from provision.errors import OperationError, UsageError
from provision.inventory.model import Host, Inventory, Zone
from provision.inventory.writeback import WriteBackError, prepare, write
from provision.text import printable

from . import closed as C
from . import health as H
from . import health_from as HF
from . import phases as P
from . import trust as T
from .inputs import alias_message, validate_values, who
from .inputs import find_zone as find_zone  # re-exported: the CLI and tests call run.find_zone
from .journal import Journal
from .marker import marker_name, parse
from .store import JournalStore

Say = Callable[[str], None]
R = TypeVar("R")

if TYPE_CHECKING:
    from provision.inventory.writeback import Edit


def make_provider(zone: Zone, inv: Inventory) -> Provider:
    return provider_for(zone, inv)


def apply_change(provider: Provider, changes: ChangeSet) -> str:
    """The one provider write of every phase (a function of its own so that tests can
    kill the process right after it, before the journal records it)."""
    return provider.apply(changes)


def _closed_record_holds(ctx: Ctx, rtype: str, old: tuple[str, ...],
                         new: tuple[str, ...]) -> None:
    """The closed record finalize will write must read back as written (the name fits
    one TXT string, the zone's old values are ones provision writes): refused before
    anything changes otherwise."""
    if ctx.keep <= 0:
        return
    now = ctx.now()
    c = C.Closed(ctx.name, rtype, now, now + min(ctx.keep, C.MAX_KEEP), ctx.by, old, new)
    try:
        C.parse(C.closed_rrset(c))
    except C.ClosedError as e:
        raise UsageError(f"{ctx.where} {rtype}: the record this migration would leave at "
                         f"finalize could not be read back ({e}): refused before anything is "
                         "changed (with closed_migration_days: 0 the zone keeps none)") from None


@dataclass
class Ctx:
    inv: Inventory
    zone: Zone
    name: str
    store: JournalStore
    say: Say = lambda s: None
    provider_factory: Callable[[Zone, Inventory], Provider] | None = None  # default: make_provider
    timeout: float = 300.0
    now: Callable[[], float] = lambda: time.time()  # looked up per call: a test's clock
    write_inventory: bool = True      # finalize writes an ad hoc --to into the inventory
    operator: str = ""                # user@host (default: who())
    rtype: str = "A"                  # the migrating record's type, once known
    written: str = ""                 # file:line of the inventory edit finalize made
    allow_revert: bool = False        # start may put back a finished migration's old value
    stopped: Callable[[], bool] = lambda: False  # Ctrl-C: `run` starts no further phase
    health_from: Host | None = None   # --health-from: where the checks run (None: here)
    _provider: Provider | None = None
    _auth: list[prop.Target] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return relative(self.name, self.zone.name)

    @property
    def by(self) -> str:
        if not self.operator:
            self.operator = who()
        return self.operator

    @property
    def keep(self) -> float:
        """How long the zone remembers a finalized migration (its closed record)."""
        return self.zone.closed_migration_days * 86400.0

    def declared(self, rtype: str | None = None) -> list[RRset]:
        """The inventory's records at this name (of `rtype`)."""
        return [rr for rr in desired(self.zone) if rr.name == self.name
                and (rtype is None or rr.type == rtype.upper())]

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            self._provider = (self.provider_factory or make_provider)(self.zone, self.inv)
        return self._provider

    @property
    def resolvers(self) -> tuple[str, ...]:
        return self.inv.dns.resolvers if self.inv.dns else ()

    def auth_targets(self) -> list[prop.Target]:
        """The zone's authoritative servers with an address (names resolved through the
        configured resolvers only; those without an address are skipped, and said)."""
        if self._auth is None:
            out, unknown = prop.authoritative_targets(self.provider.nameservers(),
                                                      self.provider.direct, self.resolvers,
                                                      self.zone.visibility, self.zone.name)
            if self.zone.visibility == "private":
                self.notes.append(f"{self.zone.name} is private: verified through "
                                  "dns.resolvers (inside its networks) only")
            self.notes += [f"authoritative server {label} not asked: no address (list a "
                           "resolver under dns.resolvers)" for label in unknown]
            self._auth = out
        return self._auth

    def targets(self) -> list[prop.Target]:
        return [*self.auth_targets(), *(prop.Target(r, r, "resolver") for r in self.resolvers)]



def _call(fn: Callable[[], R]) -> R:
    try:
        return fn()
    except StaleRead as e:
        raise OperationError(e.message) from None
    except ProviderError as e:
        raise OperationError(e.message) from None


# --- reading -------------------------------------------------------------------------

@dataclass
class Loaded:
    journal: Journal | None        # the file as it is
    view: P.ZoneView
    rec: P.Reconciled


def load(ctx: Ctx, rtype: str | None = None) -> Loaded:
    """The journal, the marker and the record, each checked (`trust`) before it may drive
    a change: anything that is not about this record, of a managed type, in this zone,
    is refused (UsageError naming the file or the TXT record) and nothing is sent."""
    # a private zone without resolvers, or a public one whose provider names no
    # nameserver, cannot be verified from here: said before any change (Unverifiable)
    ctx.auth_targets()
    j = ctx.store.load(ctx.name)
    declared = frozenset(rr.key for rr in desired(ctx.zone))
    if j is not None:
        try:
            T.admit_journal(j, name=ctx.name, zone=ctx.zone.name, provider=ctx.zone.provider,
                            declared=declared)
        except T.Untrusted as e:
            raise UsageError(f"the migration journal {ctx.store.path(ctx.name)} is refused: "
                             f"{e}; nothing was sent") from None
    marker_rr = _call(lambda: ctx.provider.get_rrset(marker_name(ctx.name), "TXT"))
    mk = None
    # a closed migration's record is parsed strictly by `closed` (in the view); it is
    # never an open marker
    if marker_rr is not None and not C.claims_closed(marker_rr):
        where = f"the migration marker {printable(marker_rr.name)} TXT"
        why = T.marker_strings_problem(marker_rr.values)
        mk = None if why else parse(marker_rr)
        if mk is None:
            raise UsageError(f"{where} is refused: {why or 'not a marker provision wrote'}; "
                             "nothing was sent (remove or fix that TXT record by hand)")
        try:
            T.admit_marker(mk, name=ctx.name, zone=ctx.zone.name, declared=declared,
                           journal=j, now=ctx.now())
        except T.Untrusted as e:
            raise UsageError(f"{where} is refused: {e}; nothing was sent") from None
    rtype = (j.type if j else None) or (mk.type if mk else None) or rtype
    if rtype:
        ctx.rtype = rtype
    record = _call(lambda: ctx.provider.get_rrset(ctx.name, rtype)) if rtype else None
    if record is not None and record.alias is None:
        why = values_problem(record.type, list(record.values))
        if why:
            raise UsageError(f"the provider's answer for {printable(ctx.name)} {record.type} "
                             f"is refused: {why}; nothing was sent")
    closed_rr = _call(lambda: ctx.provider.get_rrset(C.closed_name(ctx.name, rtype), "TXT")) \
        if rtype else None
    view = P.ZoneView(record, marker_rr, closed_rr)
    rec = P.reconcile(j, view, name=ctx.name, zone=ctx.zone.name.rstrip(".") + ".",
                      provider=ctx.zone.provider, now=ctx.now())
    return Loaded(j, view, rec)


def settle(ctx: Ctx, loaded: Loaded) -> Journal | None:
    """Bring the journal file in line with what reconcile found (before a command acts)."""
    rec = loaded.rec
    j = rec.journal
    for n in rec.notes:
        ctx.say(f"{ctx.where}: {n}")
    if j is None:
        return None
    if rec.needs_served:
        st = P.state(j, "original" if rec.closed == "rolled back" else
                     "finalized" if rec.closed == "finalized" else
                     "lowered" if j.phase == "lowered" else "switched")
        if not j.token and ctx.provider.capabilities.change_ids:
            ctx.say(f"{ctx.where}: the provider's change id was lost in the interruption: "
                    "the change is taken as served from now")
        served_at = wait_served(ctx, st, ChangeSet(), j.token)
        if not rec.closed:
            j = (replace(j, lowered_at=served_at) if j.phase == "lowered"
                 else replace(j, switched_at=served_at))
            ctx.store.save(j)
    if rec.closed:
        if loaded.journal is not None or rec.source == "journal":
            ctx.store.archive(j, rec.closed)
        ctx.say(f"{ctx.where}: migration closed ({rec.closed})")
        return None
    if rec.changed:
        ctx.store.save(j)
    return j


# --- changing the zone --------------------------------------------------------------

def wait_served(ctx: Ctx, st: P.State, changes: ChangeSet, token: str) -> float:
    """Until the provider has the change (Route53 INSYNC, Cloud DNS done) and every
    authoritative server we can ask serves `st`; returns that moment."""
    provider = ctx.provider
    if token and provider.capabilities.change_ids:  # else: the servers are asked below
        _call(lambda: provider.wait(changes, token, ctx.timeout))
    targets = ctx.auth_targets()
    if not targets:
        return ctx.now()
    deadline = time.monotonic() + ctx.timeout
    while True:
        answers = prop.probe(targets, ctx.name, ctx.rtype, timeout=2.0)
        ok, problems = P.served(answers, st.values, st.ttl)
        if ok:
            return ctx.now()
        if time.monotonic() >= deadline:
            raise OperationError(f"{ctx.where}: after {ctx.timeout:g} s not every "
                                 f"authoritative server serves it: {'; '.join(problems)}; "
                                 "run status, then the same command again")
        time.sleep(0.05)


def change(ctx: Ctx, j: Journal, view: P.ZoneView, intent: str, target: P.StateName,
           **intent_fields: Any) -> tuple[Journal, float]:
    """Journal the intent, apply the atomic change to `target`, wait until served.
    Returns the intent journal (token set) and the moment the change was served."""
    now = ctx.now()
    j1 = j.at(intent, now, token="", **intent_fields)  # type: ignore[arg-type]
    ctx.store.save(j1)
    cs = P.change_to(j1, view, target, now, by=ctx.by, keep=ctx.keep)
    try:
        token = apply_change(ctx.provider, cs)
    except StaleRead as e:
        ctx.store.save(j)  # nothing was applied: the intent is void
        raise OperationError(f"{e.message} (migration of {ctx.where} left in phase {j.phase})") \
            from None
    except ProviderError as e:
        raise OperationError(f"{e.message}; the migration of {ctx.where} may or may not have "
                             "moved: `status` tells, from the zone") from None
    j1 = replace(j1, token=token)
    ctx.store.save(j1)
    return j1, wait_served(ctx, P.state(j1, target), cs, token)


# --- commands ------------------------------------------------------------------------

def _existing(ctx: Ctx, rtype: str | None) -> list[RRset]:
    types = [rtype.upper()] if rtype else ["A", "AAAA", "CNAME"]
    found = []
    for t in types:
        rr = ctx.provider.get_rrset(ctx.name, t)
        if rr is not None:
            found.append(rr)
    return found


def start(ctx: Ctx, to: Sequence[str], lower_ttl: int, rtype: str | None = None
          ) -> Journal | None:
    """Open a migration to `to`, or (`to` empty) to what the inventory declares. None:
    nothing to migrate (the zone already holds the inventory's values; said)."""
    loaded = load(ctx, rtype)
    if loaded.rec.conflict and loaded.rec.journal is None:
        raise UsageError(loaded.rec.conflict)
    if loaded.rec.open or loaded.rec.conflict:
        j = loaded.rec.journal
        assert j is not None
        raise UsageError(f"a migration of {ctx.where} is already open (phase {j.phase}, "
                         f"started {_iso(j.started_at)}, to {', '.join(j.target_values)}): "
                         "see `provision dns migrate status`; finish or roll it back first")
    found = _call(lambda: _existing(ctx, rtype))
    if not found:
        raise UsageError(f"{ctx.name} has no {rtype or 'A, AAAA or CNAME'} record in zone "
                         f"{ctx.zone.name}: a migration moves an existing record (create new "
                         "ones with `provision dns apply`)")
    _refuse_foreign(ctx)
    if not to:
        target = _inventory_target(ctx, found, rtype)
        if target is None:
            return None
        found = [rr for rr in found if rr.type == target.type]
        to = target.values
    elif len(found) > 1:
        fam = "AAAA" if ":" in to[0] else "A"
        found = [rr for rr in found if rr.type == fam] or found[:1]
    current = found[0]
    if current.alias is not None:
        raise UsageError(alias_message(ctx.where, ctx.zone.name, current))
    assert current.ttl is not None
    values = validate_values(current.type, to)
    if values == current.values:
        raise UsageError(f"{ctx.where} {current.type} already holds {', '.join(values)}")
    _closed_record_holds(ctx, current.type, current.values, values)
    _refuse_revert(ctx, current.type, values)
    writeback_check(ctx, current.type, values)  # an unwritable inventory: refused now
    settle(ctx, loaded)  # a stale local journal (closed elsewhere) is archived first
    lower = min(lower_ttl, current.ttl)
    if lower < lower_ttl:
        ctx.say(f"{ctx.where}: the TTL is already {current.ttl} s, not above --lower-ttl "
                f"{lower_ttl}: kept at {current.ttl}")
    now = ctx.now()
    j = Journal(name=ctx.name, type=current.type, zone=ctx.zone.name.rstrip(".") + ".",
                provider=ctx.zone.provider, original_values=current.values,
                original_ttl=current.ttl, target_values=values, lower_ttl=lower,
                phase="lowering", started_at=now, history=((round(now, 3), "started"),),
                by=ctx.by)
    ctx.rtype = current.type
    # the record's closed record (an earlier migration) stays: finalize merges it
    view = P.ZoneView(current, None)
    ctx.say(f"{ctx.where} {current.type}: lowering the TTL {current.ttl} -> {lower} s "
            f"(values {', '.join(current.values)} kept)")
    j1, served_at = change(ctx, j, view, "lowering", "lowered")
    j2 = j1.at("lowered", ctx.now(), lowered_at=served_at)
    ctx.store.save(j2)
    ctx.say(f"{ctx.where}: lowered TTL served by every authoritative server; cutover allowed "
            f"from {_iso(served_at + j2.original_ttl)} (in {j2.original_ttl} s)")
    return j2


def _refuse_foreign(ctx: Ctx) -> None:
    """A record another owner's ownership marker claims is theirs to move (exit 2)."""
    origin = names.origin(ctx.zone.name)
    marker = _call(lambda: ctx.provider.get_rrset(ownership_marker_name(ctx.name, origin), "TXT"))
    owner = ctx.inv.dns.owner if ctx.inv.dns is not None else None
    claim = foreign([marker] if marker is not None else [], origin, owner).get(ctx.name)
    if claim is not None:
        raise UsageError(f"{ctx.where}: the ownership marker {printable(claim.marker.name)} "
                         f"says the inventory with owner id '{claim.owner}' manages it; "
                         "provision never moves another owner's records (if that is this "
                         "inventory under another file name, set dns.owner: "
                         f"{claim.owner}; the owner id defaults to the inventory's name)")


def _refuse_revert(ctx: Ctx, rtype: str, values: tuple[str, ...]) -> None:
    """A migration back to a value a finished migration moved the record away from (its
    closed record in force) needs --allow-revert, as `dns apply` does."""
    rr = _call(lambda: ctx.provider.get_rrset(C.closed_name(ctx.name, rtype), "TXT"))
    if rr is None:
        return
    try:
        c = C.parse(rr)
        live = C.in_force(c, ctx.now(), ctx.keep)
    except C.ClosedError as e:
        raise UsageError(f"{rr.name} says phase=closed but is malformed ({e}): provision does "
                         f"not act on {ctx.where} {rtype}; remove it by hand") from None
    back = sorted(set(values) & (set(c.from_values) - set(c.to_values)))
    if not live or not back:
        return
    what = C.describe(c, ctx.now())
    if ctx.allow_revert:
        ctx.say(f"{ctx.where}: --allow-revert: putting {', '.join(back)} back undoes a finished "
                f"migration ({what})")
        return
    raise UsageError(f"{what}; migrating to {', '.join(values)} puts {', '.join(back)} back: "
                     f"if that migration is genuine, the inventory should declare "
                     f"{', '.join(c.to_values)}; to undo it on purpose pass --allow-revert")


def _inventory_target(ctx: Ctx, found: Sequence[RRset], rtype: str | None) -> RRset | None:
    """The inventory's record at NAME that differs from the zone (no --to given)."""
    decl = ctx.declared(rtype)
    if not decl:
        raise UsageError(f"the inventory declares no {rtype or 'A, AAAA or CNAME'} record "
                         f"{ctx.where} in zone {ctx.zone.name}: change its values there, or "
                         "give --to")
    zone_now = {rr.type: rr for rr in found}
    pairs = [(d, zone_now[d.type]) for d in decl if d.type in zone_now]
    if not pairs:
        raise UsageError(f"{ctx.name} has no {'/'.join(d.type for d in decl)} record in zone "
                         f"{ctx.zone.name}: a migration moves an existing record (create it "
                         "with `provision dns apply`)")
    moving = [(d, z) for d, z in pairs if d.values != z.values]
    if not moving:
        d, z = pairs[0]
        ctx.say(f"{ctx.where} {d.type}: nothing to migrate: the zone already holds "
                f"{', '.join(z.values)}, as the inventory declares")
        return None
    if len(moving) > 1:
        raise UsageError(f"{ctx.where}: the inventory changes both "
                         f"{' and '.join(d.type for d, _ in moving)}: migrate one at a time "
                         "(--type)")
    d, z = moving[0]
    ctx.say(f"{ctx.where} {d.type}: the inventory declares {', '.join(d.values)}, the zone "
            f"holds {', '.join(z.values)}: migrating to the inventory's values")
    return d


def writeback_check(ctx: Ctx, rtype: str, values: tuple[str, ...]) -> Edit | None:
    """When `values` differ from what the inventory declares (an ad hoc --to), the edit
    finalize will write, prepared and checked now (None when none is needed or
    --no-write-inventory). An inventory that cannot be updated is refused before any
    change, so nothing is left half-done."""
    decl = ctx.declared(rtype)
    if not decl or decl[0].values == values or not ctx.write_inventory:
        return None
    rec = next(r for r in ctx.zone.records if absolute(r.name, ctx.zone.name) == ctx.name
               and r.type == rtype)
    try:
        return prepare(ctx.inv, ctx.zone.name, rec.name, rtype, values)
    except WriteBackError as e:
        raise UsageError(f"{ctx.where}: the inventory declares {', '.join(decl[0].values)} and "
                         f"would have to be updated to {', '.join(values)}, but: {e}; fix that, "
                         "or pass --no-write-inventory (then " + (
                             f"dns apply refuses to put the old value back for "
                             f"{ctx.zone.closed_migration_days} days, and `provision check` "
                             "warns)" if ctx.zone.closed_migration_days else
                             "dns apply changes the record back: closed_migration_days is 0)")
                         ) from None


def _third_value(ctx: Ctx, j: Journal) -> None:
    """The inventory was edited to a value that is neither end of the open migration."""
    decl = ctx.declared(j.type)
    if decl and decl[0].values not in (j.target_values, j.original_values):
        raise UsageError(f"{ctx.where} {j.type}: the inventory now declares "
                         f"{', '.join(decl[0].values)}, but the open migration goes "
                         f"{', '.join(j.original_values)} -> {', '.join(j.target_values)}: "
                         "refused; set the inventory back to one of them, or roll the "
                         "migration back and start again")


def _open(ctx: Ctx, loaded: Loaded, allow_conflict: bool = False) -> Journal:
    if loaded.rec.conflict and not allow_conflict:
        raise OperationError(loaded.rec.conflict)
    j = settle(ctx, loaded)
    if j is None:
        raise UsageError(f"no open migration of {ctx.where} (start one with "
                         "`provision dns migrate start`)")
    ctx.rtype = j.type
    return j


def cutover(ctx: Ctx, checks: Sequence[H.Check], force: bool) -> tuple[Journal, str]:
    loaded = load(ctx)
    j = _open(ctx, loaded)
    if j.phase in ("switched", "verified"):
        return j, "already cut over"
    if j.phase != "lowered":
        raise UsageError(f"{ctx.where}: cutover needs phase lowered, the migration is {j.phase}")
    _third_value(ctx, j)
    gate = P.cutover_gate(j, ctx.now(), force)
    if not gate.ok:
        raise UsageError(gate.message)
    warn = gate.message
    if warn:
        ctx.say(f"{ctx.where}: {warn}")
    HF.gate(ctx.where, checks, j.target_values, j.original_values, ctx.say, ctx.inv,
            ctx.health_from)
    ctx.say(f"{ctx.where}: switching {', '.join(j.original_values)} -> "
            f"{', '.join(j.target_values)} (ttl {j.lower_ttl})")
    j1, served_at = change(ctx, j, loaded.view, "switching", "switched",
                           forced=gate.wait > 0)
    j2 = j1.at("switched", ctx.now(), switched_at=served_at)
    ctx.store.save(j2)
    ctx.say(f"{ctx.where}: new values served by every authoritative server; caches may hold "
            f"the old ones until {_iso(j2.stale_until or served_at)}")
    return j2, warn


def probe(ctx: Ctx, j: Journal) -> list[prop.Answer]:
    return prop.probe(ctx.targets(), ctx.name, j.type)


def verify(ctx: Ctx) -> tuple[Journal, P.Verification, list[prop.Answer]]:
    loaded = load(ctx)
    j = _open(ctx, loaded)
    if j.phase not in ("switched", "verified"):
        raise UsageError(f"{ctx.where}: nothing to verify before the cutover (phase {j.phase})")
    answers = probe(ctx, j)
    v = P.verify(j, answers, ctx.now())
    if v.ok and j.phase == "switched":
        j = j.at("verified", ctx.now(), verified_at=ctx.now())
        ctx.store.save(j)
    return j, v, answers


def finalize(ctx: Ctx, ttl: int | None) -> Journal:
    loaded = load(ctx)
    j = _open(ctx, loaded)
    if j.phase == "switched":
        answers = probe(ctx, j)
        v = P.verify(j, answers, ctx.now())
        if not v.ok:
            raise OperationError(f"{ctx.where}: not verified yet: {'; '.join(v.notes)}")
        j = j.at("verified", ctx.now(), verified_at=ctx.now())
        ctx.store.save(j)
    if j.phase != "verified":
        raise UsageError(f"{ctx.where}: finalize needs a verified cutover (phase {j.phase})")
    decl = ctx.declared(j.type)
    d = decl[0] if decl else None
    inventory_ok = d is not None and d.values in (j.target_values, j.original_values)
    # the inventory's TTL when it declares either end (so that `dns plan` is then empty)
    final = ttl or (d.ttl if d is not None and inventory_ok else j.original_ttl)
    edit = None
    if d is not None and d.values == j.original_values:
        edit = writeback_check(ctx, j.type, j.target_values)  # refused here, before the change
    days = ctx.zone.closed_migration_days
    ctx.say(f"{ctx.where}: raising the TTL {j.lower_ttl} -> {final} s; the marker becomes a "
            f"closed migration's record for {days} days" if days else
            f"{ctx.where}: raising the TTL {j.lower_ttl} -> {final} s and removing the marker")
    j1, _ = change(ctx, j, loaded.view, "finalizing", "finalized", final_ttl=final)
    ctx.store.archive(j1, "finalized")
    if edit is not None:
        try:
            write(edit)
        except WriteBackError as e:
            raise OperationError(f"{ctx.where}: finalized in the zone, but the inventory was not "
                                 f"updated: {e}; until it says {', '.join(j.target_values)}, "
                                 + (f"dns apply refuses to put the old value back (for {days} "
                                    "days)" if days else "dns apply changes the record back "
                                    "(closed_migration_days is 0): update it now")) from None
        ctx.written = edit.where
        ctx.say(f"{ctx.where}: inventory updated: {edit.where}: "
                f"{', '.join(j.original_values)} -> {', '.join(edit.values)}")
    elif d is not None and d.values == j.original_values:
        ctx.say(f"{ctx.where}: --no-write-inventory: the inventory still declares "
                f"{', '.join(d.values)}; update it to {', '.join(j.target_values)}. "
                + (f"For {days} days dns plan/apply refuse to put the old value back without "
                   f"--allow-revert {ctx.where} (the closed migration's record in the zone)"
                   if days else
                   "dns apply will change the record back (closed_migration_days is 0)"))
    elif d is not None and not inventory_ok:
        ctx.say(f"{ctx.where}: the inventory declares {', '.join(d.values)}, neither end of this "
                f"migration: not written; dns apply would change the record to that")
    elif d is not None and d.ttl != final:
        ctx.say(f"{ctx.where}: the inventory declares ttl {d.ttl}, the record now has {final}: "
                "dns apply will change the TTL")
    return j1


def rollback(ctx: Ctx) -> tuple[Journal | None, str]:
    loaded = load(ctx)
    rec = loaded.rec
    j = rec.journal
    if j is None:
        raise UsageError(rec.conflict or f"no open migration of {ctx.where}: nothing to roll back")
    if rec.conflict and rec.source == "marker":
        # Nothing but a TXT record (writable by anyone who can write the zone) says what the
        # "original" values were, and the record matches none of its states: restoring
        # them would let that TXT record choose the record's new values.
        raise UsageError(f"{rec.conflict.split('; only')[0]}; and the only account of this "
                         f"migration is the zone's marker {marker_name(ctx.name)} TXT (no "
                         "journal on this machine): provision does not restore values read "
                         "from a TXT record alone; roll back from the machine that holds the "
                         "journal, or fix the record and remove the marker by hand; nothing "
                         "was sent")
    if rec.closed:
        settle(ctx, loaded)
        return j, rec.closed
    if rec.changed and not rec.conflict:
        ctx.store.save(j)
    ctx.rtype = j.type
    view = loaded.view
    if P.matches(view, P.state(j, "original")):
        ctx.store.archive(j, "rolled back")
        return j, "rolled back (the zone already held the original record)"
    ctx.say(f"{ctx.where}: restoring {', '.join(j.original_values)} ttl {j.original_ttl} "
            f"(from {view.describe()})")
    j1, _ = change(ctx, j, view, "rolling-back", "original", rollback_from=view.snapshot())
    ctx.store.archive(j1, "rolled back")
    return j1, "rolled back"


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


# --- run: every phase -------------------------------------------------------------------

class Stopped(Exception):
    """`run` stopped between phases (Ctrl-C): `journal` is where the migration stands."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal.phase)
        self.journal = journal


def _unless_stopped(ctx: Ctx, j: Journal) -> None:
    if ctx.stopped():
        raise Stopped(j)


def run_all(ctx: Ctx, to: Sequence[str], lower_ttl: int, rtype: str | None,
            checks: Sequence[H.Check], final_ttl: int | None, grace: float,
            countdown: Callable[[float, str], None]) -> tuple[Journal | None, dict[str, float]]:
    """start (or resume), wait out the old TTL, cutover, verify until the resolvers
    have the new values, finalize. Stops at the first failure; everything is resumable."""
    t0 = ctx.now()
    timings: dict[str, float] = {}
    loaded = load(ctx, rtype)
    if loaded.rec.conflict:
        raise OperationError(loaded.rec.conflict)
    if loaded.rec.open:
        j = settle(ctx, loaded)
        assert j is not None
        ctx.rtype = j.type
        if to and validate_values(j.type, to) != j.target_values:
            raise UsageError(f"the open migration of {ctx.where} goes to "
                             f"{', '.join(j.target_values)}, not {', '.join(to)}: finish or "
                             "roll it back first")
        _third_value(ctx, j)
        if j.phase in ("lowered", "switched", "verified"):
            writeback_check(ctx, j.type, j.target_values)
        ctx.say(f"{ctx.where}: resuming the open migration (phase {j.phase})")
    else:
        started = start(ctx, to, lower_ttl, rtype)
        if started is None:
            return None, timings
        j = started
        timings["lowered"] = round(ctx.now() - t0, 3)
    _unless_stopped(ctx, j)
    if j.phase == "lowered":
        assert j.cutover_ready_at is not None
        countdown(j.cutover_ready_at - ctx.now(), f"{ctx.where}: the old TTL "
                  f"({j.original_ttl} s) runs out in every cache")
        _unless_stopped(ctx, j)
        j, _ = cutover(ctx, checks, False)
        timings["switched"] = round(ctx.now() - t0, 3)
    _unless_stopped(ctx, j)
    if j.phase == "switched":
        deadline = (j.stale_until or ctx.now()) + grace
        while True:
            _unless_stopped(ctx, j)
            j2, v, _answers = verify(ctx)
            if v.ok:
                j = j2
                break
            left = deadline - ctx.now()
            if left <= 0:
                raise OperationError(f"{ctx.where}: not verified {grace:g} s after the TTL "
                                     f"window: {'; '.join(v.notes)}; the migration stays open "
                                     "(phase switched): run it again, or verify/finalize/rollback")
            longest = max((s.ttl or 0 for s in v.stale), default=0)
            countdown(min(max(longest + 0.05, 0.2), left),
                      f"{ctx.where}: resolvers still hold the old answer")
        timings["verified"] = round(ctx.now() - t0, 3)
    _unless_stopped(ctx, j)
    if j.phase == "verified":
        j = finalize(ctx, final_ttl)
        timings["finalized"] = round(ctx.now() - t0, 3)
    return j, timings
