"""The DNS change-fraction guard (30 % of a zone's managed records, zones of 10 or more),
proven at each place it acts: the pure plan (what counts, where the line is), the CLI
(`dns plan` says it, `dns apply` refuses without --force and sends nothing), and the
re-plan after a stale read (the zone changed under us: the new plan is guarded too)."""

from __future__ import annotations

import pytest

from provision.dns import markers, zone_plan
from provision.dns import rrset as rrsets
from provision.dns.markers import marker_rrset
from provision.dns.rrset import RRset, absolute, rrset
from provision.dns.zone_plan import plan_zone

Z = "example.org."
BASE = [rrset(Z, "SOA", 3600, ["ns1.example.org. h.example.org. 1 3600 600 86400 5"]),
        rrset(Z, "NS", 3600, ["ns1.example.org."])]


def a(name: str, *values: str, ttl: int = 300) -> RRset:
    return rrset(absolute(name, Z), "A", ttl, values)


def owned(name: str) -> RRset:
    return marker_rrset(absolute(name, Z), Z, ["A"])


def zone(n: int, *, owned_too: bool = True) -> list[RRset]:
    recs = [a(f"h{i}", f"192.0.2.{i + 1}") for i in range(n)]
    marks = [owned(f"h{i}") for i in range(n)] if owned_too else []
    return [*BASE, *recs, *marks]


def want(n: int, moved: int = 0, dropped: int = 0) -> list[RRset]:
    """The n records, the first `moved` with a new value, the last `dropped` left out."""
    out = [a(f"h{i}", "198.51.100.1" if i < moved else f"192.0.2.{i + 1}") for i in range(n)]
    return out[:n - dropped]


def test_the_constants_are_the_documented_rule() -> None:
    assert zone_plan.GUARD_FRACTION == 0.30 and zone_plan.GUARD_MIN_RECORDS == 10


@pytest.mark.parametrize(("n", "moved", "dropped", "guarded"), [
    (10, 3, 0, False),   # 30 %: allowed (more than 30 % is refused)
    (10, 4, 0, True),
    (10, 0, 4, True),    # deletions count
    (10, 2, 2, True),    # and add up with updates
    (10, 0, 3, False),
    (20, 6, 0, False),
    (20, 7, 0, True),
    (9, 9, 0, False),    # fewer than 10 managed records: no guard
    (11, 4, 0, True),    # 4 > 3.3
    (100, 30, 0, False),
    (100, 31, 0, True),
])
def test_where_the_line_is(n: int, moved: int, dropped: int, guarded: bool) -> None:
    plan = plan_zone(Z, want(n, moved, dropped), zone(n))
    assert bool(plan.guard) is guarded, plan.guard
    assert plan.managed == n
    if guarded:
        assert plan.guard == (f"the plan changes or deletes {moved + dropped} of the {n} managed "
                              f"records in {Z} (more than 30 %); check it and pass --force to "
                              "apply it")
        assert plan.change_set, "the guard refuses at apply time; the plan is still shown"


def test_creations_and_foreign_records_do_not_count() -> None:
    # 20 new records beside 10 untouched: nothing changed or deleted
    plan = plan_zone(Z, [*want(10), *(a(f"n{i}", "192.0.2.200") for i in range(20))], zone(10))
    assert plan.guard == "" and plan.managed == 10
    # 100 records someone else owns make the zone bigger, not the managed share smaller
    foreign = [a(f"f{i}", "192.0.2.99") for i in range(100)]
    plan = plan_zone(Z, want(10, moved=4), [*zone(10), *foreign])
    assert plan.managed == 10 and "4 of the 10" in plan.guard


def test_managed_means_declared_or_owned_and_present() -> None:
    # 10 present and declared but never marked owned: still managed (declared)
    plan = plan_zone(Z, want(10, moved=4), zone(10, owned_too=False))
    assert plan.managed == 10 and plan.guard
    # 10 owned, 6 of them dropped from the inventory: deleted, and managed still counts them
    plan = plan_zone(Z, want(10, dropped=6), zone(10))
    assert plan.managed == 10 and "6 of the 10" in plan.guard
    assert sum(c.op == "delete" for c in plan.changes) == 6
    # declared but absent records are not managed records that exist now
    plan = plan_zone(Z, want(10), [*BASE])
    assert plan.managed == 0 and plan.guard == ""


def test_records_under_an_open_migration_are_not_counted() -> None:
    have = zone(10)
    migrating = [rrset(f"_provision-migration.h{i}.{Z}", "TXT", 60, ['"x"']) for i in range(4)]
    plan = plan_zone(Z, want(10, moved=4), [*have, *migrating])
    assert plan.guard == "" and not plan.changes


def test_a_refused_plan_keeps_its_guard_and_sends_nothing() -> None:
    plan = plan_zone(Z, [*want(10, moved=4), rrset(Z, "CNAME", 300, ["x.example.net."])], zone(10))
    assert plan.refused and plan.guard and not plan.change_set


# --- the CLI and the re-plan, against the local Cloud DNS server ------------------------------

PROJECT, MZ = "lab-project", "example-org"


# --- the names, values and markers the guard's counts rest on --------------------------------

def test_names_against_a_zone_spelled_any_way() -> None:
    for zone in ("EXAMPLE.BOX", "example.box.", "Example.Box."):
        assert rrsets.absolute("api", zone) == "api.example.box."
        assert rrsets.relative("api.example.box.", zone) == "api"
        assert rrsets.relative("example.box.", zone) == "@"
        assert rrsets.in_zone("a.example.box.", zone) and rrsets.in_zone("example.box.", zone)
    assert not rrsets.in_zone("example.net.", "example.box")
    assert not rrsets.in_zone("badexample.box.", "example.box")
    assert rrsets.relative("api.example.net.", "example.box") == "api.example.net."


@pytest.mark.parametrize(("rtype", "value", "want"), [
    ("A", " 192.0.2.1 ", "192.0.2.1"), ("AAAA", "2001:DB8:0::1", "2001:db8::1"),
    ("A", "not-an-ip", "not-an-ip"),
    ("CNAME", "LB.Example.NET.", "lb.example.net."), ("CNAME", "LB.Example.NET", "lb.example.net."),
    ("NS", "NS1.Example.org", "ns1.example.org."), ("PTR", "Host.Example.org.", "host.example.org."),
    ("TXT", '"Mixed Case"', '"Mixed Case"'),
])
def test_values_are_normalised_per_type(rtype: str, value: str, want: str) -> None:
    assert rrsets.normalise_value(rtype, value) == want


def test_rrsets_are_normalised_and_describe_themselves() -> None:
    rr = rrset("API.Example.org", "a", 300, ["192.0.2.2", "192.0.2.1", "192.0.2.1"])
    assert rr == RRset("api.example.org.", "A", 300, ("192.0.2.1", "192.0.2.2"))
    assert rrset("api.example.org.", "A", 300, []).name == "api.example.org."
    assert rr.describe() == "192.0.2.1, 192.0.2.2 ttl 300"
    alias = rrsets.Alias("lb-1.elb.amazonaws.com.", "Z35SXDOTRQ7X7K")
    ar = rrset("api.example.org.", "A", None, [], alias)
    assert ar.alias == alias
    assert ar.describe() == ("alias to lb-1.elb.amazonaws.com. (alias records have no TTL of "
                             "their own)")


def test_marker_names_and_owned_types() -> None:
    assert markers.marked_name("_provision.api.example.org.") == "api.example.org."
    assert markers.marked_name("_provision.org.") == "org."
    assert markers.marked_name("_provision.") is None and markers.marked_name("api.example.org.") is None
    assert markers.marked_name("x._provision.example.org.") is None
    mk = RRset("_provision.api.example.org.", "TXT", 300,
               ('"provision owns A"', '"provision owns AAAA', 'provision owns CNAME"',
                '"someone else"'))
    assert markers.owned_types(mk) == {"A"}


def test_ownership_reads_every_marker_whatever_comes_before() -> None:
    stray = rrset("_provision.x.example.net.", "TXT", 300, ['"provision owns A"'])  # not our zone
    other = rrset("api.example.org.", "TXT", 300, ['"v=spf1"'])
    empty = rrset("_provision.b.example.org.", "TXT", 300, ['"hello"'])
    got = markers.ownership([stray, other, empty, owned("c"), a("c", "192.0.2.3")], Z)
    assert list(got) == ["c.example.org."] and got["c.example.org."][1] == {"A"}


def test_a_plan_in_full() -> None:
    have = [*zone(3), a("gone", "192.0.2.50"), owned("gone")]
    plan = plan_zone(Z, [a("h0", "198.51.100.9"), a("h1", "192.0.2.2"), a("new", "192.0.2.7")],
                     have)
    assert plan.zone == Z and plan.errors == () and plan.notes == () and plan.managed == 4
    assert [(c.op, c.key[0]) for c in plan.changes] == [
        ("update", "h0.example.org."), ("create", "new.example.org."),
        ("delete", "gone.example.org."), ("delete", "h2.example.org.")]
    cs = plan.change_set
    assert set(cs.additions) >= {a("h0", "198.51.100.9"), a("new", "192.0.2.7"), owned("new")}
    assert owned("gone") in cs.deletions and owned("h2") in cs.deletions
    assert zone_plan.marker_changes(plan) == ["_provision.gone.example.org.", "_provision.h2.example.org.",
                                      "_provision.new.example.org."]


def test_a_refused_plan_in_full() -> None:
    plan = plan_zone(Z, [a("h0", "198.51.100.9"), rrset("x.example.net.", "A", 300, ["192.0.2.1"])],
                     zone(2))
    assert plan.errors == ("x.example.net. A: not inside zone example.org.",)
    assert plan.zone == Z and plan.notes == () and plan.managed == 2
    assert [c.op for c in plan.changes] == ["update", "create", "delete"]
    assert plan.change_set == zone_plan.ChangeSet()


def test_notes_for_aliases_and_open_migrations() -> None:
    from provision.dns.migrate.marker import marker_name as migration_marker

    alias = rrset("api.example.org.", "A", None, [], rrsets.Alias("lb.example.net.", "Z1"))
    plan = plan_zone(Z, [a("api", "192.0.2.1")], [*BASE, alias])
    assert plan.notes == ("api A is an alias to lb.example.net. (no TTL of its own); the plan "
                          "replaces it with plain records, ttl 300",)
    for name in ("w.example.org.", "*.w.example.org."):
        held = [*zone(1), rrset(name, "A", 300, ["192.0.2.9"]),
                rrset(migration_marker(name), "TXT", 60, ['"x"'])]
        plan = plan_zone(Z, [*want(1), rrset(name, "A", 300, ["192.0.2.10"])], held)
        rel = rrsets.relative(name, Z)
        assert plan.notes == (f"{rel} A: left alone while its migration is open (provision dns "
                              f"migrate status {rel}); finalize or roll it back first",)
        assert not plan.changes


def test_cname_conflicts_in_full() -> None:
    signed = [*BASE, rrset("w.example.org.", "RRSIG", 300, ["A 8 3 300 x"]),
              rrset("w.example.org.", "NSEC", 300, ["x.example.org. A RRSIG NSEC"]),
              rrset("w.example.org.", "NSEC3", 300, ["1 0 1 - x A"])]
    # DNSSEC records at a name are not "other data" beside a CNAME
    assert not plan_zone(Z, [rrset("w.example.org.", "CNAME", 300, ["lb.example.net."])],
                         signed).refused
    have = [*BASE, a("gone", "192.0.2.5"), owned("gone"),
            rrset("w.example.org.", "TXT", 300, ['"x"']), rrset("w.example.org.", "MX", 300, ["10 m."])]
    plan = plan_zone(Z, [rrset("w.example.org.", "CNAME", 300, ["lb.example.net."])], have)
    # the deletion sorted first does not stop the check of what comes after it
    assert plan.errors == ("w CNAME: the name also has MX, TXT records (a CNAME must be alone at "
                           "its name)",)
    have = [*BASE, rrset("w.example.org.", "CNAME", 300, ["lb.example.net."])]
    assert plan_zone(Z, [a("w", "192.0.2.1")], have).errors == (
        "w A: the name has a CNAME (nothing else may exist beside a CNAME)",)


def test_markers_are_rewritten_for_every_name_that_changes() -> None:
    have = [*zone(2)]
    plan = plan_zone(Z, [a("h0", "192.0.2.1"), a("h1", "198.51.100.2"), a("z", "192.0.2.9")],
                     have)
    # h1: updated, its marker unchanged (no rewrite); z: new, so a marker is added after it
    assert owned("z") in plan.change_set.additions
    assert owned("h1") not in plan.change_set.additions
    assert owned("h1") not in plan.change_set.deletions


def test_a_migration_marker_of_a_short_name() -> None:
    assert zone_plan._migrating("_provision-migration.org.") == "org."
    assert zone_plan._migrating("_provision-migration.") is None
    assert zone_plan._migrating("_provision.api.example.org.") is None
