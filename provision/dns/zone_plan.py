"""DNS records as data, and the pure plan: desired RRsets vs what the provider serves.

Pure, no I/O. Providers turn their API's records into `RRset`s and a `ChangeSet` into
their API's calls; everything decided in between lives here:

* names normalised (absolute, lowercase, trailing dot; '@' and relative names resolved);
* values normalised (IPv6 compressed, CNAME targets absolute and lowercase; TXT, MX,
  SRV and CAA in dnspython's presentation form, see `provision.dnsdata.rdata`);
* only managed records are touched: a record is managed when the inventory declares it
  (name and type) or when provision's ownership marker says provision wrote it. Other
  records (SOA, NS, someone else's TXT or A) are never changed or deleted;
* ownership markers: a TXT RRset at ``_provision.<name>`` with one string per owned type
  and the owner id of the inventory that wrote it (``"provision owns A owner=ml-team"``,
  see `provision.dnsdata.owner`), written in the same atomic change as the records it
  covers, so a record removed from the inventory is deleted only if this inventory
  created or changed it. A marker without an owner id (written before owner ids) is
  read as every inventory's, as it was; a marker of another owner makes its name
  untouchable: a plan that would change a record there is refused, naming the owner.
  Importing (adopting) a record writes no marker: the first change marks it;
* a record under an open migration (its ``_provision-migration.<name>`` marker is in the
  zone) is left alone: `dns apply` never undoes a lowered TTL or a cutover half-way;
* a CNAME at the apex, or beside other data at the same name, is refused;
* a plan that deletes or changes more than 30 % of the managed records of a zone that
  has at least 10 of them is refused without ``force`` (octoDNS's rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Literal

from provision.dnsdata.names import split_marker
from provision.dnsdata.rdata import (
    MANAGED_TYPES,
    MIGRATE_TYPES,
    values_problem,
)
from provision.frozen import frozen

from .markers import (
    MARKER_TYPE,
    MIGRATION_LABEL,
    Claim,
    foreign,
    marked_name,
    marker_problems,
    marker_rrset,
    ownership,
    show_text,
)
from .rrset import RRset, absolute, in_zone, relative

GUARD_FRACTION = 0.30
GUARD_MIN_RECORDS = 10


# --- the plan -----------------------------------------------------------------------------

Op = Literal["create", "update", "delete"]


@frozen
class RecordChange:
    op: Op
    old: RRset | None
    new: RRset | None

    @property
    def key(self) -> tuple[str, str]:
        rr = self.new or self.old
        assert rr is not None
        return rr.key


@frozen
class ChangeSet:
    """What a provider applies atomically.

    `deletions` are the exact RRsets read from the provider (a provider that can, makes
    their presence a prerequisite); `additions` are the new RRsets. An RRset in
    `additions` whose key is not in `deletions` must not exist yet.
    """

    deletions: tuple[RRset, ...] = ()
    additions: tuple[RRset, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.deletions or self.additions)


@frozen
class ZonePlan:
    zone: str                                   # absolute
    changes: tuple[RecordChange, ...] = ()      # record changes, in name/type order
    change_set: ChangeSet = field(default_factory=ChangeSet)  # records + markers
    errors: tuple[str, ...] = ()                # conflicts: nothing may be applied
    notes: tuple[str, ...] = ()                 # said, not acted on
    managed: int = 0                            # managed records that exist now
    guard: str = ""                             # why --force is needed ("" if not)
    expired: tuple[RRset, ...] = ()             # closed migrations' records deleted with it

    @property
    def refused(self) -> bool:
        return bool(self.errors)


def plan_zone(zone: str, want: Sequence[RRset], actual: Sequence[RRset], *,
              hold: Mapping[tuple[str, str], str] | None = None,
              expire: Sequence[RRset] = (), owner: str | None = None) -> ZonePlan:
    """The changes that make the managed records of `zone` equal `want`.

    `hold`: records (name, type) to leave alone, each with the note that says why (a
    cutover for `dns migrate`, a refused revert; decided by `provision.dns.migrate.guard`).
    `expire`: closed migrations' records (exact RRsets read) deleted in the same change.
    `owner`: the inventory's owner id, written into the markers (None: markers without
    one); a change at a name another owner's marker claims is refused, naming it."""
    origin = absolute("@", zone)
    have = {rr.key: rr for rr in actual}
    want_by_key = {rr.key: rr for rr in want}
    owners = ownership(actual, origin, owner)
    theirs = foreign(actual, origin, owner)
    owned = {(n, t) for n, (_, types) in owners.items() for t in types if t in MANAGED_TYPES}
    errors: list[str] = []
    notes: list[str] = []

    errors += marker_problems(actual, origin)
    apex_owned = {k for k in owned if k[0] == origin and k not in want_by_key and k in have}
    for k in sorted(apex_owned):
        notes.append(f"@ {k[1]}: not deleted although its ownership marker says provision "
                     "wrote it: at the zone apex provision changes only records the "
                     "inventory declares (delete it by hand if it should go)")
    owned -= apex_owned

    for rr in want:
        if not in_zone(rr.name, origin):
            errors.append(f"{rr.name} {rr.type}: not inside zone {origin}")
        if rr.type == "CNAME" and rr.name == origin:
            errors.append(f"{relative(rr.name, origin)} CNAME: a CNAME is not allowed at the zone apex")

    changes: list[RecordChange] = []
    for key, new in sorted(want_by_key.items()):
        old = have.get(key)
        if old is None:
            changes.append(RecordChange("create", None, new))
        elif not _same(old, new):
            changes.append(RecordChange("update", old, new))
            if old.alias is not None:
                notes.append(f"{relative(old.name, origin)} {old.type} is an alias to "
                             f"{old.alias.dns_name} (no TTL of its own); the plan replaces it "
                             f"with plain records, ttl {new.ttl}")
    for key in sorted(owned - want_by_key.keys()):
        if key in have:
            changes.append(RecordChange("delete", have[key], None))

    # the provider's answers are checked before a hold (cutover, open migration) hides them
    for c in changes:
        if c.old is not None and c.old.alias is None:
            why = values_problem(c.old.type, list(c.old.values))
            if why:
                errors.append(f"{show_text(relative(c.old.name, origin))} {c.old.type}: the "
                              f"provider's answer is refused: {why}")

    # a closed migration's record ("phase=closed", well-formed or not) is no open
    # migration: provision.dns.migrate.guard reads it strictly and decides (`hold`)
    migrating = {n for rr in actual if rr.type == MARKER_TYPE
                 and (n := _migrating(rr.name)) is not None and in_zone(n, origin)
                 and '"phase=closed"' not in rr.values}
    # a migration moves A, AAAA or CNAME values: it holds only those (a marker never
    # freezes the TXT, MX, SRV or CAA records beside them)
    held = [c for c in changes if c.key[0] in migrating and c.key[1] in MIGRATE_TYPES
            and c.key not in (hold or {})]
    if held:
        changes = [c for c in changes if c not in held]
        for c in held:
            notes.append(f"{relative(c.key[0], origin)} {c.key[1]}: left alone while its "
                         f"migration is open (provision dns migrate status "
                         f"{relative(c.key[0], origin)}); finalize or roll it back first")
    if hold:
        notes += [hold[c.key] for c in changes if c.key in hold]
        changes = [c for c in changes if c.key not in hold]

    errors += _foreign_changes(origin, changes, theirs)
    notes += _shared_names(origin, want_by_key, changes, theirs)
    errors += _conflicts(origin, changes, have)

    managed_keys = (owned | want_by_key.keys()) & have.keys()
    touched = sum(1 for c in changes if c.op != "create")
    guard = ""
    if len(managed_keys) >= GUARD_MIN_RECORDS and touched > GUARD_FRACTION * len(managed_keys):
        guard = (f"the plan changes or deletes {touched} of the {len(managed_keys)} managed "
                 f"records in {origin} (more than {int(GUARD_FRACTION * 100)} %); "
                 "check it and pass --force to apply it")
    if errors:
        return ZonePlan(origin, tuple(changes), ChangeSet(), tuple(errors), tuple(notes),
                        len(managed_keys), guard)
    cs = _change_set(origin, changes, owners, owner)
    gone = tuple(rr for rr in expire if rr not in cs.deletions)
    if gone:
        cs = ChangeSet((*cs.deletions, *gone), cs.additions)
    return ZonePlan(origin, tuple(changes), cs, (), tuple(notes), len(managed_keys), guard,
                    gone)


def _migrating(name: str) -> str | None:
    """The record name an open migration's marker (``_provision-migration.<name>``, see
    provision.dns.migrate.marker) covers, or None."""
    parts = split_marker(name)
    return parts[1] if parts is not None and parts[0] == MIGRATION_LABEL else None


def _foreign_changes(origin: str, changes: Sequence[RecordChange],
                     theirs: Mapping[str, Claim]) -> list[str]:
    """A change at a name another owner's marker claims: refused, saying whose it is."""
    out = []
    for c in changes:
        claim = theirs.get(c.key[0])
        if claim is None:
            continue
        rel = show_text(relative(c.key[0], origin))
        out.append(f"{rel} {c.key[1]}: not changed: the ownership marker "
                   f"{show_text(claim.marker.name)} says the inventory with owner id "
                   f"'{claim.owner}' manages {rel} ({', '.join(sorted(claim.types))}); "
                   f"provision never changes another owner's records (leave {rel} out of "
                   f"this inventory, or have '{claim.owner}' give it up: remove it from "
                   f"their inventory and apply; if '{claim.owner}' is this inventory under "
                   f"another file name, set dns.owner: {claim.owner})")
    return out


def _shared_names(origin: str, want: Mapping[tuple[str, str], RRset],
                  changes: Sequence[RecordChange], theirs: Mapping[str, Claim]) -> list[str]:
    """Names this inventory declares that another owner's marker claims, where nothing
    changes (a change there is an error): two inventories claim one name."""
    changed = {c.key for c in changes}
    out = []
    for name, rtype in sorted(k for k in want if k[0] in theirs and k not in changed):
        claim = theirs[name]
        out.append(f"warning: {show_text(relative(name, origin))} {rtype}: declared here and "
                   f"claimed by the inventory with owner id '{claim.owner}' (marker "
                   f"{show_text(claim.marker.name)}): two inventories claim one name; the "
                   "zone already has this inventory's values, but only its owner may "
                   "change it")
    return out


def _same(old: RRset, new: RRset) -> bool:
    return old.alias is None and old.ttl == new.ttl and old.values == new.values


def _conflicts(origin: str, changes: Sequence[RecordChange],
               have: dict[tuple[str, str], RRset]) -> list[str]:
    """CNAME beside other data at the same name, after the plan is applied."""
    after = {k for k in have if k[1] not in ("RRSIG", "NSEC", "NSEC3")}
    for c in changes:
        if c.op == "delete":
            after.discard(c.key)
        else:
            after.add(c.key)
    by_name: dict[str, set[str]] = {}
    for name, rtype in after:
        by_name.setdefault(name, set()).add(rtype)
    out = []
    for c in changes:
        if c.op == "delete" or c.new is None:
            continue
        types = by_name.get(c.new.name, set())
        others = sorted(types - {"CNAME"})
        if c.new.type == "CNAME" and others:
            out.append(f"{relative(c.new.name, origin)} CNAME: the name also has "
                       f"{', '.join(others)} records (a CNAME must be alone at its name)")
        elif c.new.type != "CNAME" and "CNAME" in types:
            out.append(f"{relative(c.new.name, origin)} {c.new.type}: the name has a CNAME "
                       "(nothing else may exist beside a CNAME)")
    return list(dict.fromkeys(out))


def _change_set(origin: str, changes: Sequence[RecordChange],
                owners: dict[str, tuple[RRset, set[str]]], owner: str | None) -> ChangeSet:
    deletions = [c.old for c in changes if c.old is not None]
    additions = [c.new for c in changes if c.new is not None]
    by_name: dict[str, list[RecordChange]] = {}
    for c in changes:
        by_name.setdefault(c.key[0], []).append(c)
    for name, cs in sorted(by_name.items()):
        old_marker, types = owners.get(name, (None, set()))
        new_types = set(types)
        for c in cs:
            if c.op == "delete":
                new_types.discard(c.key[1])
            else:
                new_types.add(c.key[1])
        # a marker without owner id is rewritten with ours when its name changes
        new_marker = marker_rrset(name, origin, new_types, owner) if new_types else None
        if old_marker == new_marker:
            continue
        if old_marker is not None:
            deletions.append(old_marker)
        if new_marker is not None:
            additions.append(new_marker)
    return ChangeSet(tuple(deletions), tuple(additions))


def marker_changes(plan: ZonePlan) -> list[str]:
    """Marker RRsets the change set touches (for the plan's detail lines)."""
    names = {rr.name for rr in (*plan.change_set.deletions, *plan.change_set.additions)
             if rr.type == MARKER_TYPE and marked_name(rr.name) is not None}
    return sorted(names)
