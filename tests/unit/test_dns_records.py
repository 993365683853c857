"""The pure DNS plan: names, values, ownership, conflicts, the 30 % guard; and the pure
reading of propagation answers."""

from __future__ import annotations

import pytest

from provision.dns import propagation as prop
from provision.dns.markers import marked_name, marker_name, marker_rrset
from provision.dns.rrset import RRset, absolute, relative, rrset
from provision.dns.zone_plan import ChangeSet, plan_zone

Z = "example.org."


def a(name: str, *values: str, ttl: int = 300, rtype: str = "A") -> RRset:
    return rrset(absolute(name, Z), rtype, ttl, values)


def owned(name: str, *types: str) -> RRset:
    return marker_rrset(absolute(name, Z), Z, types)


BASE = [rrset(Z, "SOA", 3600, ["ns1.example.org. h.example.org. 1 3600 600 86400 5"]),
        rrset(Z, "NS", 3600, ["ns1.example.org."])]


@pytest.mark.parametrize(("name", "want"), [
    ("@", "example.org."), ("", "example.org."), ("API", "api.example.org."),
    ("api.example.org.", "api.example.org."), ("api.example.org", "api.example.org."),
    ("a.b", "a.b.example.org."), ("*.x", "*.x.example.org."), ("Example.Org", "example.org."),
])
def test_names_are_normalised(name: str, want: str) -> None:
    assert absolute(name, "Example.ORG") == want
    assert absolute(name, "example.org.") == want


def test_relative_names_for_display() -> None:
    assert relative("example.org.", Z) == "@"
    assert relative("api.example.org.", Z) == "api"
    assert relative("other.net.", Z) == "other.net."


def test_values_are_normalised_so_equal_data_is_no_change() -> None:
    assert a("v6", "2001:DB8:0::1", rtype="AAAA") == a("v6", "2001:db8::1", rtype="AAAA")
    assert rrset("w.example.org.", "CNAME", 60, ["LB.Example.net"]).values == ("lb.example.net.",)
    have = [*BASE, a("api", "192.0.2.2", "192.0.2.1")]
    assert plan_zone(Z, [a("API.example.org.", "192.0.2.1", "192.0.2.2")], have).changes == ()


def test_markers_round_trip_including_wildcards() -> None:
    assert marker_name("api.example.org.", Z) == "_provision.api.example.org."
    assert marker_name("*.x.example.org.", Z) == "_provision._wildcard.x.example.org."
    assert marked_name("_provision._wildcard.x.example.org.") == "*.x.example.org."
    assert marked_name("api.example.org.") is None


def test_create_update_and_the_change_set_holds_exact_old_rrsets_and_markers() -> None:
    old = a("api", "192.0.2.1", ttl=600)
    plan = plan_zone(Z, [a("api", "192.0.2.9", ttl=60), a("new", "192.0.2.3")], [*BASE, old])
    assert [(c.op, c.key[0]) for c in plan.changes] == [("update", "api.example.org."),
                                                       ("create", "new.example.org.")]
    assert plan.change_set.deletions == (old,)
    assert set(plan.change_set.additions) == {a("api", "192.0.2.9", ttl=60), a("new", "192.0.2.3"),
                                              owned("api", "A"), owned("new", "A")}


def test_only_owned_records_missing_from_the_inventory_are_deleted() -> None:
    mine, theirs = a("old", "192.0.2.5"), a("mail", "192.0.2.25")
    have = [*BASE, mine, owned("old", "A"), theirs]
    plan = plan_zone(Z, [], have)
    assert [(c.op, c.key) for c in plan.changes] == [("delete", mine.key)]
    assert set(plan.change_set.deletions) == {mine, owned("old", "A")}
    assert plan.change_set.additions == ()


def test_a_marker_keeps_the_other_owned_types_at_a_name() -> None:
    have = [*BASE, a("h", "192.0.2.1"), a("h", "2001:db8::1", rtype="AAAA"), owned("h", "A", "AAAA")]
    plan = plan_zone(Z, [a("h", "192.0.2.1")], have)
    assert [c.op for c in plan.changes] == ["delete"]
    assert owned("h", "A") in plan.change_set.additions
    assert owned("h", "A", "AAAA") in plan.change_set.deletions


def test_soa_ns_and_other_types_are_never_touched() -> None:
    have = [*BASE, rrset("txt.example.org.", "TXT", 300, ['"v=spf1 -all"'])]
    plan = plan_zone(Z, [], have)
    assert plan.changes == () and not plan.change_set


def test_a_cname_at_the_apex_is_refused() -> None:
    plan = plan_zone(Z, [rrset(Z, "CNAME", 300, ["lb.example.net."])], BASE)
    assert plan.refused and "apex" in " ".join(plan.errors)
    assert not plan.change_set


def test_a_cname_beside_other_data_is_refused_both_ways() -> None:
    have = [*BASE, rrset("w.example.org.", "TXT", 300, ['"x"'])]
    plan = plan_zone(Z, [a("w", "lb.example.net.", rtype="CNAME")], have)
    assert plan.refused and "must be alone" in plan.errors[0]
    have = [*BASE, a("w", "lb.example.net.", rtype="CNAME")]
    plan = plan_zone(Z, [a("w", "192.0.2.1")], have)
    assert plan.refused and "has a CNAME" in plan.errors[0]


def test_replacing_an_owned_a_with_a_cname_is_fine() -> None:
    have = [*BASE, a("w", "192.0.2.1"), owned("w", "A")]
    plan = plan_zone(Z, [a("w", "lb.example.net.", rtype="CNAME")], have)
    assert not plan.refused
    assert sorted(c.op for c in plan.changes) == ["create", "delete"]


def _zone_of(n: int) -> list[RRset]:
    return [*BASE, *(a(f"h{i}", f"192.0.2.{i + 1}") for i in range(n))]


def test_the_30_percent_guard() -> None:
    have = _zone_of(10)
    want = [a(f"h{i}", f"192.0.2.{i + 1}") for i in range(10)]
    changed = [a(f"h{i}", "198.51.100.1") if i < 3 else w for i, w in enumerate(want)]
    assert plan_zone(Z, changed, have).guard == ""           # 3 of 10: allowed
    changed[3] = a("h3", "198.51.100.1")
    assert "4 of the 10" in plan_zone(Z, changed, have).guard  # 4 of 10: refused without --force
    small = _zone_of(9)
    assert plan_zone(Z, [a(f"h{i}", "198.51.100.1") for i in range(9)], small).guard == ""
    assert plan_zone(Z, [*want, *(a(f"n{i}", "192.0.2.200") for i in range(20))], have).guard == ""


def test_changeset_truthiness() -> None:
    assert not ChangeSet() and ChangeSet(additions=(a("x", "192.0.2.1"),))


# --- propagation: pure reading of answers ---------------------------------------------

NS1 = prop.Target("ns1.example.org.", "192.0.2.53", "authoritative")
NS2 = prop.Target("ns2.example.org.", "192.0.2.54", "authoritative")
RES = prop.Target("192.0.2.99", "192.0.2.99", "resolver")


def test_all_agree() -> None:
    v = prop.assess("api.example.org.", "A", [
        prop.Answer(NS1, "NOERROR", True, ("192.0.2.1",), 300),
        prop.Answer(NS2, "NOERROR", True, ("192.0.2.1",), 300),
        prop.Answer(RES, "NOERROR", False, ("192.0.2.1",), 120)], ("192.0.2.1",))
    assert v.ok and v.served and not v.notes


def test_a_lagging_authoritative_server_is_named() -> None:
    v = prop.assess("api.example.org.", "A", [
        prop.Answer(NS1, "NOERROR", True, ("192.0.2.1",), 300),
        prop.Answer(NS2, "NOERROR", True, ("192.0.2.0",), 300)], ("192.0.2.1",))
    assert not v.served and v.disagree == ("ns2.example.org.",)
    assert "ns2.example.org. (192.0.2.54) answers 192.0.2.0, expected 192.0.2.1" in v.notes[0]


def test_an_answer_without_aa_is_not_authoritative() -> None:
    v = prop.assess("api.example.org.", "A", [prop.Answer(NS1, "NOERROR", False, ("192.0.2.1",), 300)],
                    ("192.0.2.1",))
    assert not v.served and "without the AA flag" in v.notes[0]


def test_without_expectation_the_authoritative_majority_is_the_reference() -> None:
    v = prop.assess("api.example.org.", "A", [
        prop.Answer(NS1, "NOERROR", True, ("192.0.2.1",), 300),
        prop.Answer(NS2, "NOERROR", True, ("192.0.2.1",), 300),
        prop.Answer(RES, "NOERROR", False, ("192.0.2.0",), 42)])
    assert v.disagree == ("192.0.2.99",) and "up to 42 s" in v.notes[0]


def test_negative_caching_is_explained() -> None:
    v = prop.assess("new.example.org.", "A", [
        prop.Answer(NS1, "NOERROR", True, ("192.0.2.1",), 300),
        prop.Answer(RES, "NXDOMAIN", False, negative_ttl=900)], ("192.0.2.1",))
    assert "negative answer" in v.notes[0] and "900 s" in v.notes[0] and "SOA minimum" in v.notes[0]
    v = prop.assess("gone.example.org.", "A", [prop.Answer(NS1, "NXDOMAIN", True, negative_ttl=5)])
    assert v.ok and "SOA minimum" in v.notes[0]


def test_expected_absent_and_timeouts() -> None:
    v = prop.assess("gone.example.org.", "A", [prop.Answer(NS1, "NXDOMAIN", True),
                                               prop.Answer(NS2, "TIMEOUT", error="no answer")], ())
    assert not v.served and v.disagree == ("ns2.example.org.",) and "did not answer" in v.notes[0]


def test_a_dual_stack_name_from_the_inventory() -> None:
    from provision.dns.providers.route53 import Settings
    from provision.dns.rrset import desired
    from provision.inventory.model import Record, Zone

    z = Zone("example.org", "route53", (Record("h", "A", ("192.0.2.1",), 300),
                                        Record("h", "AAAA", ("2001:db8::1",), 300)), Settings())
    want = desired(z)
    assert [rr.key for rr in want] == [("h.example.org.", "A"), ("h.example.org.", "AAAA")]
    plan = plan_zone(Z, want, BASE)
    assert not plan.refused and [c.op for c in plan.changes] == ["create", "create"]
    assert owned("h", "A", "AAAA") in plan.change_set.additions
