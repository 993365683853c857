"""What `dns migrate status` reports: one migration as it stands, and every open one
(local journals and the markers in the inventory's zones). Read-only in the zone (I/O)."""

from __future__ import annotations

import time
from typing import Any

from provision.dns import propagation as prop
from provision.dns.provider import ProviderError
from provision.dnsdata import names
from provision.inventory.model import Inventory
from provision.text import printable

from . import closed as C
from . import phases as P
from . import run as R
from .journal import Journal
from .marker import LABEL, marked_name, marker_name
from .run import Ctx, _iso, load, probe
from .store import JournalStore


def status_of(ctx: Ctx) -> dict[str, Any] | None:
    """The migration of ctx.name as it stands (read-only in the zone; a local journal
    that the zone proves closed is archived), or None when none is open."""
    loaded = load(ctx)
    rec = loaded.rec
    j = rec.journal
    if j is None:
        return None
    if rec.closed:
        if loaded.journal is not None and not ctx.store.busy(ctx.name):
            ctx.store.archive(loaded.journal, rec.closed)
        ctx.say(f"{ctx.where}: closed ({rec.closed}); {' '.join(rec.notes)}")
        return None
    now = ctx.now()
    answers = probe(ctx, j)
    what, left = P.time_left(j, now)
    notes = list(rec.notes) + ctx.notes
    if ctx.store.busy(ctx.name):
        notes = [n for n in notes if "interrupted" not in n]
        notes.insert(0, "another provision process on this machine is working on this "
                        "migration right now (e.g. a `run` waiting)")
    if j.phase in ("switched", "verified", "switching"):
        notes += [n for n in P.verify(j, answers, now).notes if n not in notes]
    else:
        notes += P.resolver_notes(j, answers)
    return {
        "name": j.name, "zone": j.zone, "type": j.type, "provider": j.provider,
        "phase": j.phase, "source": rec.source, "conflict": rec.conflict or None,
        "by": j.by or None, "mine": not j.by or j.by == ctx.by,
        "started_at": _iso(j.started_at), "original": {"values": list(j.original_values),
                                                       "ttl": j.original_ttl},
        "target": {"values": list(j.target_values), "ttl": j.lower_ttl},
        "lower_ttl": j.lower_ttl, "forced": j.forced,
        "lowered_at": _iso(j.lowered_at), "switched_at": _iso(j.switched_at),
        "verified_at": _iso(j.verified_at),
        "waiting_for": what or None, "seconds_left": None if left is None else round(left, 1),
        "zone_now": loaded.view.describe(),
        "answers": [{"server": a.target.label, "address": a.target.address,
                     "role": a.target.role, "status": a.status, "aa": a.aa,
                     "values": list(a.values), "ttl": a.ttl, "negative_ttl": a.negative_ttl,
                     "serves": _serves(j, a)} for a in answers],
        "notes": list(dict.fromkeys(notes)), "next": P.next_step(rec, now) or None,
    }


def _serves(j: Journal, a: prop.Answer) -> str:
    if a.status != "NOERROR":
        return a.status.lower()
    if a.values == j.target_values:
        return "new"
    if a.values == j.original_values:
        return "old"
    return "other"


def open_names(inv: Inventory, store: JournalStore) -> tuple[list[str], list[str]]:
    """Names with an open migration: every local journal, and every marker in the
    inventory's zones (a teammate's). Returns (names, problems)."""
    found = []
    problems = []
    for path, j, err in store.all():
        if j is None:
            problems.append(f"the migration journal {path} is refused: {printable(err)}")
        else:
            found.append(j.name)
    for z in (inv.dns.zones if inv.dns else ()):
        try:
            rrsets = R.make_provider(z, inv).list_rrsets()  # the run's (tests replace it)
        except ProviderError as e:
            problems.append(f"zone {z.name}: markers not read: {e.message}")
            continue
        for rr in rrsets:
            if rr.type == "TXT" and C.closed_covered(rr.name) is not None:
                try:   # a finished migration's record: not open
                    C.in_force(C.parse(rr), time.time(), z.closed_migration_days * 86400.0)
                except C.ClosedError as e:
                    problems.append(f"{rr.name} says phase=closed but is malformed ({e}): "
                                    "provision does not act on that record")
            elif rr.type == "TXT" and rr.name.startswith(LABEL + "."):
                n = marked_name(rr.name)
                why = ("not a marker name" if not n else
                       names.problem(n) or names.reserved(n) or
                       ("" if names.in_zone(n, z.name) else f"outside zone {z.name}") or
                       ("" if marker_name(n) == rr.name else
                        f"provision writes the marker of {n} as {marker_name(n)}"))
                if why or not n:
                    problems.append(f"the migration marker {printable(rr.name)} TXT is "
                                    f"refused: {why}")
                    continue
                found.append(n)
    return sorted(set(found)), problems

