"""Whole-zone verification and forgotten low TTLs: answers in, per-record verdicts out.

Pure, no I/O (`zonequery` asks the servers). For every record the inventory declares in
a zone, `questions` says what to ask: the record of every authoritative server and every
resolver, and the name's migration marker (``_provision-migration.<name>`` TXT) of every
authoritative server (of the resolvers when there is none: a private zone). `judge` turns the answers into a `ZoneReport`:

* one `propagation.Verdict` per record (who serves what, who disagrees and why: the same
  judgement as `dns check NAME`, compared with the declared values);
* `TtlFinding`s from the zone itself, so they are found from any machine, not only where
  the migration journal is: a record whose served TTL is below the declared one with no
  open migration (a TTL lowered for a cutover and never raised again), an open migration
  marker older than `STALE_MIGRATION` seconds, and a marker provision will not read.

Markers are hostile input (anyone who can write a TXT record in the zone writes one):
they are checked as `dns migrate` checks them (`trust.marker_strings_problem`,
`marker.parse`, `trust.admit_marker`) and one that fails is a finding, never an
explanation of a low TTL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from provision.dns.markers import MARKER_TYPE
from provision.dns.propagation import Answer, Target, Verdict, assess
from provision.dns.rrset import RRset, rrset
from provision.frozen import frozen

from .migrate import trust
from .migrate.marker import Marker, marker_name
from .migrate.marker import parse as parse_marker

STALE_MIGRATION = 86400.0       # an open migration older than a day was forgotten

Question = tuple[Target, str, str]          # (server, absolute name, type)
FindingKind = Literal["low_ttl", "old_migration", "bad_marker"]


@frozen
class TtlFinding:
    name: str
    type: str                       # the record's type ("TXT" for a bad marker)
    kind: FindingKind
    declared_ttl: int | None
    served_ttl: int | None          # the lowest an authoritative server serves
    servers: tuple[str, ...]        # labels of the servers it was seen on
    detail: str


@frozen
class ZoneReport:
    zone: str
    targets: tuple[Target, ...]
    verdicts: tuple[Verdict, ...]   # one per declared record, in the inventory's order
    findings: tuple[TtlFinding, ...]

    @property
    def disagreeing(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if not v.ok)

    @property
    def servers_disagreeing(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for v in self.verdicts for s in v.disagree))

    @property
    def ok(self) -> bool:
        # no server asked: nobody disagrees, yet nothing is verified
        return bool(self.targets) and not self.disagreeing and not self.findings


def marker_servers(targets: Sequence[Target]) -> list[Target]:
    """Who is asked for migration markers: the authoritative servers (a marker is the
    zone's), or, with none (a private zone, seen only through resolvers inside its
    networks), the resolvers: else an open migration there would never be found."""
    auth = [t for t in targets if t.role == "authoritative"]
    return auth or list(targets)


def questions(records: Sequence[RRset], targets: Sequence[Target]) -> list[Question]:
    """One question per record per server, and one per name for its migration marker
    of each of the `marker_servers`."""
    out: list[Question] = [(t, rr.name, rr.type) for rr in records for t in targets]
    names = dict.fromkeys(rr.name for rr in records)
    out += [(t, marker_name(n), MARKER_TYPE) for n in names for t in marker_servers(targets)]
    return out


def _missing(t: Target) -> Answer:
    return Answer(t, "ERROR", error="not asked")


def judge(zone: str, records: Sequence[RRset], targets: Sequence[Target],
          answers: Mapping[Question, Answer], now: float) -> ZoneReport:
    """The verdicts and findings for the declared `records` of `zone` from `answers`
    (keyed like `questions`; a missing answer counts as a server that did not answer)."""
    declared: trust.Declared = frozenset(rr.key for rr in records)
    verdicts: list[Verdict] = []
    findings: list[TtlFinding] = []
    open_migrations: dict[tuple[str, str], Marker] = {}
    for name in dict.fromkeys(rr.name for rr in records):
        found = _marker(zone, name, targets, answers, declared, now)
        if isinstance(found, TtlFinding):
            findings.append(found)
        elif found is not None:
            marker, servers = found
            open_migrations[(name, marker.type)] = marker
            age = now - marker.started_at
            if age > STALE_MIGRATION:
                findings.append(TtlFinding(
                    name, marker.type, "old_migration", marker.original_ttl, marker.lower_ttl,
                    servers, f"a migration opened {_days(age)} ago is still open (phase "
                    f"{marker.phase}{', by ' + marker.by if marker.by else ''}): finish it "
                    f"with `provision dns migrate run` or roll it back"))
    for rr in records:
        got = [answers.get((t, rr.name, rr.type)) or _missing(t) for t in targets]
        verdicts.append(assess(rr.name, rr.type, got, rr.values))
        low = _low_ttl(rr, got)
        if low is not None and (rr.name, rr.type) not in open_migrations:
            findings.append(low)
    return ZoneReport(zone, tuple(targets), tuple(verdicts), tuple(findings))


def _low_ttl(rr: RRset, got: Sequence[Answer]) -> TtlFinding | None:
    """The authoritative servers that serve `rr` with a TTL below the declared one
    (resolvers count their TTL down: theirs says nothing about the zone)."""
    if rr.ttl is None:
        return None
    low = [a for a in got if a.target.role == "authoritative" and a.aa and a.status == "NOERROR"
           and a.ttl is not None and a.ttl < rr.ttl]
    if not low:
        return None
    served = min(a.ttl for a in low if a.ttl is not None)
    return TtlFinding(rr.name, rr.type, "low_ttl", rr.ttl, served,
                      tuple(a.target.label for a in low),
                      f"served with TTL {served} s, declared {rr.ttl} s, and no migration is "
                      "open (lowered for a cutover and never raised again?): `provision dns "
                      "apply` sets it back")


def _marker(zone: str, name: str, targets: Sequence[Target],
            answers: Mapping[Question, Answer], declared: trust.Declared,
            now: float) -> tuple[Marker, tuple[str, ...]] | TtlFinding | None:
    """The open migration the `marker_servers`' marker of `name` holds, with the
    servers serving it; a finding when a server serves one provision will not read."""
    mname = marker_name(name)
    valid: Marker | None = None
    seen: list[str] = []
    for t in marker_servers(targets):
        a = answers.get((t, mname, MARKER_TYPE))
        if a is None or a.status != "NOERROR" or not a.values:
            continue
        why = _marker_problem(zone, name, a.values, a.ttl, declared, now)
        if isinstance(why, str):
            return TtlFinding(mname, MARKER_TYPE, "bad_marker", None, a.ttl, (t.label,),
                              f"a migration marker provision will not read ({why}); it "
                              "explains no low TTL: remove it by hand")
        valid = valid or why
        seen.append(t.label)
    return (valid, tuple(seen)) if valid is not None else None


def _marker_problem(zone: str, name: str, values: tuple[str, ...], ttl: int | None,
                    declared: trust.Declared, now: float) -> Marker | str:
    """The marker these TXT strings hold, or why provision will not act on them."""
    why = trust.marker_strings_problem(values)
    if why:
        return why
    m = parse_marker(rrset(marker_name(name), MARKER_TYPE, ttl, values))
    if m is None:
        return "not a marker provision wrote"
    try:
        trust.admit_marker(m, name=name, zone=zone, declared=declared, journal=None, now=now)
    except trust.Untrusted as e:
        return str(e)
    return m


def _days(seconds: float) -> str:
    d = seconds / 86400
    return f"{d:.1f} days" if d < 10 else f"{d:.0f} days"
