"""The pure core of `dns migrate`: journal and marker round trips, reconciling a journal
with the zone after a crash at every boundary, the cutover gate, what answers mean."""

from __future__ import annotations

from dataclasses import replace

import pytest

from provision.dns.migrate import health, journal, marker, phases, trust
from provision.dns.migrate.journal import Journal
from provision.dns.migrate.phases import ZoneView, reconcile
from provision.dns.propagation import Answer, Target
from provision.dns.rrset import rrset
from provision.dns.zone_plan import plan_zone

NAME, ZONE = "api.example.org.", "example.org."
T0 = 1_800_000_000.0


def _j(phase: str = "lowered", **kw: object) -> Journal:
    base = Journal(name=NAME, type="A", zone=ZONE, provider="rfc2136",
                   original_values=("192.0.2.10",), original_ttl=300,
                   target_values=("192.0.2.20",), lower_ttl=60, phase="lowering",
                   started_at=T0)
    return replace(base, phase=phase, **kw)  # type: ignore[arg-type]


def _view(j: Journal, name: phases.StateName, at: float = T0 + 1) -> ZoneView:
    """The zone as it is in state `name` (record + marker exactly as provision writes them)."""
    cs = phases.change_to(j, ZoneView(None, None), name, at)
    rec = next(rr for rr in cs.additions if rr.type == j.type)
    mk = next((rr for rr in cs.additions if rr.type == "TXT"
               and rr.name.startswith("_provision-migration.")), None)
    cl = next((rr for rr in cs.additions if rr.type == "TXT" and rr is not mk), None)
    return ZoneView(rec, mk, cl)


def _rec(j: Journal | None, view: ZoneView, now: float = T0 + 10) -> phases.Reconciled:
    return reconcile(j, view, name=NAME, zone=ZONE, provider="rfc2136", now=now)


# --- data ---------------------------------------------------------------------------

def test_journal_round_trips_through_json() -> None:
    j = _j("rolling-back", lowered_at=T0 + 1.5, switched_at=T0 + 400, forced=True,
           rollback_from=journal.Snapshot(("192.0.2.20",), 60, ('"phase=switched"',), 60),
           history=((T0, "started"),))
    assert trust.from_json(journal.to_json(j)) == j


@pytest.mark.parametrize("text", ["", "[]", '{"version": 2}', '{"version": 1, "phase": "nope"}',
                                  '{"version": 1, "phase": "lowered"}'])
def test_a_broken_journal_is_a_clear_error(text: str) -> None:
    with pytest.raises(journal.JournalError):
        trust.from_json(text)


def test_journal_file_names() -> None:
    assert journal.file_name("API.example.org.") == "api.example.org.json"
    assert journal.file_name("*.example.org.") == "_wildcard.example.org.json"
    # injective: what is no record name, or lies in the reserved '_wildcard' spelling of '*',
    # has no journal file (it would share one with another record)
    for bad in ("a/../b.example.org.", "_wildcard.example.org.", "a*b.example.org.",
                "a b.example.org."):
        with pytest.raises(journal.JournalError):
            journal.file_name(bad)


def test_marker_round_trips_and_carries_phase_ttl_and_start() -> None:
    m = marker.Marker("switched", "A", 300, 60, T0 + 0.7, T0 + 5.2, ("192.0.2.10",),
                      ("192.0.2.20", "192.0.2.21"))
    rr = marker.marker_rrset(NAME, m)
    assert rr.name == "_provision-migration.api.example.org." and rr.type == "TXT"
    assert '"phase=switched"' in rr.values and '"ttl=300"' in rr.values
    assert '"started=2027-01-15T08:00:00Z"' in rr.values
    back = marker.parse(rr)
    assert back is not None
    assert back.at == T0 + 6  # rounded up: never earlier than the change
    assert back.started_at == T0
    assert back == replace(m, at=T0 + 6, started_at=T0)
    assert marker.parse(rrset(rr.name, "TXT", 60, ['"hello"'])) is None
    assert marker.marked_name(marker.marker_name("*.example.org.")) == "*.example.org."


def test_dns_plan_leaves_a_record_under_migration_alone() -> None:
    j = _j("lowered")
    view = _view(j, "lowered")
    assert view.record is not None and view.marker_rr is not None
    want = [rrset(NAME, "A", 300, ["192.0.2.10"]), rrset("www.example.org.", "A", 300, ["192.0.2.1"])]
    plan = plan_zone(ZONE, want, [view.record, view.marker_rr])
    assert [c.key for c in plan.changes] == [("www.example.org.", "A")]
    assert any("migration is open" in n for n in plan.notes)


# --- reconcile: every crash boundary ----------------------------------------------------

def test_no_journal_and_no_marker_is_no_migration() -> None:
    r = _rec(None, ZoneView(rrset(NAME, "A", 300, ["192.0.2.10"]), None))
    assert r.journal is None and not r.open and not r.conflict


@pytest.mark.parametrize("stable", ["lowered", "switched"])
def test_a_consistent_journal_is_taken_as_is(stable: str) -> None:
    j = _j(stable, lowered_at=T0 + 1)
    r = _rec(j, _view(j, stable))  # type: ignore[arg-type]
    assert r.open and r.journal == j and not r.changed and not r.notes


def test_killed_after_the_lowering_change_before_the_journal_write() -> None:
    j = _j("lowering")
    r = _rec(j, _view(j, "lowered"))
    assert r.open and r.needs_served and r.changed
    assert r.journal is not None and r.journal.phase == "lowered" and r.journal.lowered_at is None
    assert "interrupted" in r.notes[0]


def test_killed_before_the_lowering_change_means_nothing_started() -> None:
    j = _j("lowering")
    r = _rec(j, _view(j, "original"))
    assert r.closed == "never started" and not r.open


def test_killed_after_the_switch_before_the_journal_write() -> None:
    j = _j("switching", lowered_at=T0 + 1)
    r = _rec(j, _view(j, "switched"))
    assert r.journal is not None and r.journal.phase == "switched" and r.needs_served


def test_killed_before_the_switch_goes_back_to_lowered() -> None:
    j = _j("switching", lowered_at=T0 + 1)
    r = _rec(j, _view(j, "lowered"))
    assert r.journal is not None and r.journal.phase == "lowered" and r.changed
    assert r.journal.lowered_at == T0 + 1


def test_killed_around_finalize() -> None:
    j = _j("finalizing", lowered_at=T0 + 1, switched_at=T0 + 400, verified_at=T0 + 470,
           final_ttl=3600)
    assert _rec(j, _view(j, "finalized")).closed == "finalized"
    back = _rec(j, _view(j, "switched"))
    assert back.journal is not None and back.journal.phase == "verified"


def test_killed_around_rollback() -> None:
    j = _j("rolling-back", lowered_at=T0 + 1)
    assert _rec(j, _view(j, "original")).closed == "rolled back"
    r = _rec(j, _view(j, "lowered"))
    assert r.open and r.journal is not None and r.journal.phase == "rolling-back"
    assert "rollback again" in r.notes[0]


def test_a_marker_without_a_journal_rebuilds_it() -> None:
    j = _j("switched", lowered_at=T0 + 1)
    view = _view(j, "switched", at=T0 + 400.2)
    r = _rec(None, view)
    assert r.open and r.source == "marker" and r.changed
    assert r.journal is not None and r.journal.phase == "switched"
    assert r.journal.switched_at == T0 + 401 and r.journal.target_values == j.target_values
    assert r.journal.original_ttl == 300


def test_a_cutover_from_another_machine_is_adopted() -> None:
    j = _j("lowered", lowered_at=T0 + 1)
    r = _rec(j, _view(j, "switched"))
    assert r.journal is not None and r.journal.phase == "switched"


def test_closed_elsewhere() -> None:
    j = _j("lowered", lowered_at=T0 + 1)
    assert _rec(j, _view(j, "original")).closed == "rolled back"
    j2 = _j("switched", lowered_at=T0 + 1, switched_at=T0 + 400)
    assert _rec(j2, _view(replace(j2, final_ttl=300), "finalized")).closed == "finalized"


def test_a_record_changed_by_someone_else_is_a_conflict() -> None:
    j = _j("lowered", lowered_at=T0 + 1)
    view = _view(j, "lowered")
    theirs = ZoneView(rrset(NAME, "A", 60, ["192.0.2.99"]), view.marker_rr)
    r = _rec(j, theirs)
    assert r.conflict and "192.0.2.99" in r.conflict and "rollback" in r.conflict
    assert phases.next_step(r, T0).startswith("provision dns migrate rollback")


def test_the_change_carries_the_exact_read_rrsets_and_the_marker() -> None:
    j = _j("lowering")
    orig = rrset(NAME, "A", 300, ["192.0.2.10"])
    cs = phases.change_to(j, ZoneView(orig, None), "lowered", T0)
    assert cs.deletions == (orig,)
    assert [(rr.type, rr.ttl) for rr in cs.additions] == [("A", 60), ("TXT", 60)]
    lowered = _view(j, "lowered")
    cs = phases.change_to(j, lowered, "original", T0)
    assert set(cs.deletions) == {lowered.record, lowered.marker_rr}
    assert cs.additions == (orig,)


# --- timing and answers -----------------------------------------------------------------

def test_cutover_waits_for_the_old_ttl_unless_forced() -> None:
    j = _j("lowered", lowered_at=T0)
    g = phases.cutover_gate(j, T0 + 100, force=False)
    assert not g.ok and "200 s more" in g.message
    g = phases.cutover_gate(j, T0 + 100, force=True)
    assert g.ok and g.wait == 200 and "up to 200 s" in g.message
    assert phases.cutover_gate(j, T0 + 300, force=False).ok


AUTH = Target("ns1.example.org.", "192.0.2.53", "authoritative")
RES = Target("192.0.2.54", "192.0.2.54", "resolver")


def test_served_needs_values_ttl_and_aa() -> None:
    ok = Answer(AUTH, "NOERROR", True, ("192.0.2.20",), 60)
    assert phases.served([ok], ("192.0.2.20",), 60)[0]
    assert not phases.served([replace(ok, ttl=300)], ("192.0.2.20",), 60)[0]
    assert not phases.served([replace(ok, aa=False)], ("192.0.2.20",), 60)[0]


def test_verify_names_stale_resolvers_with_their_remaining_ttl() -> None:
    j = _j("switched", lowered_at=T0, switched_at=T0 + 300)
    answers = [Answer(AUTH, "NOERROR", True, ("192.0.2.20",), 60),
               Answer(RES, "NOERROR", False, ("192.0.2.10",), 41)]
    v = phases.verify(j, answers, T0 + 319)
    assert not v.ok and v.authoritative_ok
    assert v.stale[0].server == "192.0.2.54" and v.stale[0].ttl == 41
    assert any("up to 41 s more" in n and "window ends in 41 s" in n for n in v.notes)
    fresh = [answers[0], Answer(RES, "NOERROR", False, ("192.0.2.20",), 60)]
    assert phases.verify(j, fresh, T0 + 361).ok


def test_a_forced_cutover_widens_the_window_to_the_old_ttl() -> None:
    j = _j("switched", lowered_at=T0, switched_at=T0 + 10, forced=True)
    assert j.stale_until == T0 + 300


def test_a_resolver_that_clamps_ttls_upward_is_reported() -> None:
    j = _j("switched", lowered_at=T0, switched_at=T0 + 300)
    notes = phases.resolver_notes(j, [Answer(RES, "NOERROR", False, ("192.0.2.20",), 3600)])
    assert len(notes) == 1 and "clamps TTLs upward" in notes[0] and "3600" in notes[0]
    # the old TTL held from before the lowering is no clamping
    assert not phases.resolver_notes(j, [Answer(RES, "NOERROR", False, ("192.0.2.10",), 250)])


def test_negative_caching_is_explained() -> None:
    j = _j("switched", lowered_at=T0, switched_at=T0 + 300)
    v = phases.verify(j, [Answer(RES, "NXDOMAIN", False, negative_ttl=900)], T0 + 301)
    assert not v.ok
    assert any("negative caching" in n and "900 s" in n for n in v.notes)


def test_overdue_migrations_are_check_warnings() -> None:
    j = _j("lowered", lowered_at=T0)
    assert phases.overdue_findings([j], T0 + 3600) == []
    [f] = phases.overdue_findings([j], T0 + 2 * 86400)
    assert f.severity == "warning" and "2.0 days" in f.message and "rollback" in f.fix


# --- health specs -------------------------------------------------------------------------

def test_health_specs() -> None:
    assert health.parse("tcp:8000") == health.Check("tcp", 8000)
    assert health.parse("http://api.example.org:8000/healthz") == \
        health.Check("http", 8000, "api.example.org", "/healthz")
    assert health.parse("https://api.example.org/") == health.Check("https", 443, "api.example.org", "/")
    for bad in ("tcp:0", "tcp:x", "ftp://x/", "8000", "http://", "http://a:99999/"):
        with pytest.raises(ValueError):
            health.parse(bad)
