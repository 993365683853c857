"""Owner ids in shared zones: the rules for an id, the default from the inventory's name,
and the plan's decisions (another owner's record refused and named, a marker without
owner id read as before, adopting without owning)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from provision.dns.markers import claims, marker_problems, marker_rrset, ownership
from provision.dns.rrset import RRset, absolute, rrset
from provision.dns.zone_plan import plan_zone
from provision.dnsdata.owner import default_owner, problem
from provision.inventory import InventoryError, load_inventory

Z = "example.org."
LEGACY = '"provision owns A"'   # a marker written before owner ids, byte for byte


def a(name: str, *values: str, ttl: int = 300) -> RRset:
    return rrset(absolute(name, Z), "A", ttl, values)


def txt(name: str, *strings: str) -> RRset:
    return RRset(absolute(name, Z), "TXT", 300, tuple(sorted(strings)))


@pytest.mark.parametrize("owner", ["a", "ml-team", "team2", "x" * 63, "0day"])
def test_owner_ids_that_are_dns_labels_are_accepted(owner: str) -> None:
    assert problem(owner) == ""


@pytest.mark.parametrize(("owner", "why"), [
    ("", "empty"), ("x" * 64, "64 characters long"), ("ML", "is not one DNS label"),
    ("ml_team", "is not one DNS label"), ("-ml", "is not one DNS label"),
    ("ml-", "is not one DNS label"), ("ml team", "is not one DNS label"),
    ("ml\x07", "is not one DNS label"), ("ml.team", "is not one DNS label"),
    (7, "int where an owner id"),
])
def test_other_owner_ids_are_refused_in_words(owner: object, why: str) -> None:
    got = problem(owner)
    assert why in got
    assert "\x07" not in got


@pytest.mark.parametrize(("name", "owner"), [
    ("inventory", "inventory"), ("ML_Team.prod", "ml-team-prod"), ("---", "provision"),
    ("é", "provision"), ("a" * 70, "a" * 63), ("b" * 62 + "-c", "b" * 62),
])
def test_the_default_owner_is_the_inventory_name_as_a_label(name: str, owner: str) -> None:
    got = default_owner(name)
    assert got == owner
    assert problem(got) == ""


def _inventory(path: Path, dns: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"version": 1, "dns": {"zones": {}, **dns}}))
    return path


def test_the_default_owner_does_not_depend_on_where_the_checkout_is(tmp_path: Path) -> None:
    alice = load_inventory(_inventory(tmp_path / "home/alice/src/infra/ml-team.yml", {}))
    ci = load_inventory(_inventory(tmp_path / "builds/x/ml-team.yml", {}))
    assert alice.dns is not None and ci.dns is not None
    assert alice.dns.owner == ci.dns.owner == "ml-team"
    _inventory(tmp_path / "fleet/inventories/a.yml", {})
    _inventory(tmp_path / "fleet/inventories/b.yml", {"resolvers": []})
    directory = load_inventory(tmp_path / "fleet/inventories")
    assert directory.dns is not None and directory.dns.owner == "inventories"
    named = load_inventory(_inventory(tmp_path / "x.yml", {"owner": "gpu-team"}))
    assert named.dns is not None and named.dns.owner == "gpu-team"


@pytest.mark.parametrize("owner", ["GPU", "a_b", "x" * 64, "", "bad\x1b[31m"])
def test_a_bad_dns_owner_is_an_error_at_its_line(tmp_path: Path, owner: str) -> None:
    path = _inventory(tmp_path / "inv.yml", {"owner": owner})
    with pytest.raises(InventoryError) as e:
        load_inventory(path)
    [p] = e.value.problems
    assert (p.file, p.field) == (str(path), "dns.owner")
    assert p.line > 1 and "not an owner id" in p.message
    assert "\x1b" not in str(e.value)


# --- the plan ----------------------------------------------------------------------------

def test_markers_carry_the_owner_id() -> None:
    plan = plan_zone(Z, [a("api", "192.0.2.1")], [], owner="ml-team")
    assert marker_rrset(absolute("api", Z), Z, ["A"], "ml-team") in plan.change_set.additions
    assert txt("_provision.api", '"provision owns A owner=ml-team"') in plan.change_set.additions


def test_another_owners_record_is_refused_and_its_owner_named() -> None:
    theirs = txt("_provision.api", '"provision owns A owner=vision"')
    plan = plan_zone(Z, [a("api", "192.0.2.9")], [a("api", "192.0.2.1"), theirs], owner="ml-team")
    assert plan.refused and not plan.change_set
    [err] = plan.errors
    assert err.startswith("api A: not changed") and "'vision'" in err


def test_another_owners_name_takes_no_new_type_either() -> None:
    theirs = txt("_provision.api", '"provision owns A owner=vision"')
    want = [rrset(absolute("api", Z), "AAAA", 300, ["2001:db8::1"])]
    plan = plan_zone(Z, want, [a("api", "192.0.2.1"), theirs], owner="ml-team")
    assert plan.refused and "api AAAA: not changed" in plan.errors[0]


def test_another_owners_record_left_out_of_the_inventory_is_not_deleted() -> None:
    theirs = txt("_provision.api", '"provision owns A owner=vision"')
    plan = plan_zone(Z, [], [a("api", "192.0.2.1"), theirs], owner="ml-team")
    assert not plan.refused and plan.changes == () and not plan.change_set
    # the same marker without owner id is this inventory's: the record goes
    legacy = txt("_provision.api", LEGACY)
    plan = plan_zone(Z, [], [a("api", "192.0.2.1"), legacy], owner="ml-team")
    assert [c.op for c in plan.changes] == ["delete"] and legacy in plan.change_set.deletions


def test_two_inventories_claiming_one_name_is_a_warning_when_nothing_changes() -> None:
    theirs = txt("_provision.api", '"provision owns A owner=vision"')
    plan = plan_zone(Z, [a("api", "192.0.2.1")], [a("api", "192.0.2.1"), theirs], owner="ml-team")
    assert not plan.refused and not plan.change_set
    [note] = plan.notes
    assert note.startswith("warning: api A: declared here and claimed by") and "'vision'" in note
    mine = txt("_provision.api", '"provision owns A owner=ml-team"')
    assert plan_zone(Z, [a("api", "192.0.2.1")], [a("api", "192.0.2.1"), mine],
                     owner="ml-team").notes == ()


def test_a_legacy_marker_is_read_as_before_and_rewritten_with_the_owner_on_change() -> None:
    legacy = txt("_provision.api", LEGACY)
    assert ownership([legacy], Z, "ml-team") == {"api.example.org.": (legacy, {"A"})}
    assert claims([legacy], Z)["api.example.org."].owner is None
    plan = plan_zone(Z, [a("api", "192.0.2.9")], [a("api", "192.0.2.1"), legacy], owner="ml-team")
    assert not plan.refused
    assert legacy in plan.change_set.deletions
    assert txt("_provision.api", '"provision owns A owner=ml-team"') in plan.change_set.additions
    # without an owner id (as before owner ids), the same marker is written back
    plan = plan_zone(Z, [a("api", "192.0.2.9")], [a("api", "192.0.2.1"), legacy])
    assert legacy not in plan.change_set.deletions and legacy not in plan.change_set.additions


def test_adopting_is_not_owning_the_first_change_marks() -> None:
    """An imported record (no marker) that the inventory declares as it is: no change and
    no marker; it is not deleted when left out; its first change writes the marker."""
    have = [a("api", "192.0.2.1"), a("db", "192.0.2.5")]
    same = plan_zone(Z, [a("api", "192.0.2.1"), a("db", "192.0.2.5")], have, owner="ml-team")
    assert same.changes == () and not same.change_set
    assert plan_zone(Z, [a("api", "192.0.2.1")], have, owner="ml-team").changes == ()
    moved = plan_zone(Z, [a("api", "192.0.2.2"), a("db", "192.0.2.5")], have, owner="ml-team")
    assert [rr.name for rr in moved.change_set.additions if rr.type == "TXT"] == [
        "_provision.api.example.org."]


@pytest.mark.parametrize(("strings", "why"), [
    (('"provision owns A owner=a"', '"provision owns AAAA owner=b"'), "more than one owner"),
    (('"provision owns A owner=a"', LEGACY), "more than one owner"),
    (('"provision owns A owner=A"',), "not one DNS label"),
    (('"provision owns A owner="',), "empty"),
    (('"provision owns A owner=' + "x" * 64 + '"',), "64 characters"),
    (('"provision owns A owner=a\x07b"',), "not one DNS label"),
    (('"provision owns A owner=a owner=b"',), "not one DNS label"),
])
def test_a_hostile_owner_field_refuses_the_marker(strings: tuple[str, ...], why: str) -> None:
    marker = txt("_provision.api", *strings)
    [problem_] = marker_problems([marker], Z)
    assert why in problem_ and "\x07" not in problem_
    assert claims([marker], Z) == {}
    assert plan_zone(Z, [], [a("api", "192.0.2.1"), marker], owner="a").refused
