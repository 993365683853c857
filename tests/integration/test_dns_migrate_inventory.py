"""Cutovers driven by the inventory, through the CLI, on the local Cloud DNS server
(127.0.0.1 only): the target from the inventory, nothing to migrate, an unwritable
inventory refused before the zone is touched, a hostile closed record refused for its
record, closed records neither listed nor blocking a new migration, and `dns apply`
refusing a revert in any zone before applying anything."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from tests.support.clouddns_fake import FakeCloudDns, isolated_fake

PROJECT, MZ, ZONE = "lab-project", "example-org", "example.org."
API = "api.example.org."
MARKER = "_provision-migration.api.example.org."
CLOSED = "_provision-closed-a.api.example.org."     # the closed record of api A


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloudDns]:
    with isolated_fake(monkeypatch, PROJECT, MZ, ZONE, page_size=50, pending_polls=0) as f:
        f.set_rrset(PROJECT, MZ, API, "A", 1, ["127.0.0.1"])
        yield f


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv("PROVISION_STATE_DIR", str(d))
    monkeypatch.setenv("USER", "alice")
    return d


def _inv(tmp_path: Path, fake: FakeCloudDns, values: list[str], **zone: Any) -> Path:
    doc = {"version": 1, "dns": {"zones": {"example.org": {
        "provider": "clouddns", "project": PROJECT, "managed_zone": MZ, "endpoint": fake.url,
        **zone, "records": {"api": {"type": "A", "values": values, "ttl": 1}}}}}}
    p = tmp_path / "inv.yml"
    p.write_text("# the team's inventory\n" + yaml.safe_dump(doc))
    return p


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _values(fake: FakeCloudDns, name: str = API, rtype: str = "A") -> list[str]:
    return fake.rrsets(PROJECT, MZ)[(name, rtype)]["rrdatas"]


def test_run_without_to_takes_the_target_from_the_inventory_then_nothing_to_migrate(
        fake: FakeCloudDns, tmp_path: Path) -> None:
    inv = str(_inv(tmp_path, fake, ["127.0.0.2"]))
    r = _cli("dns", "migrate", "run", API, "-i", inv, "--lower-ttl", "1", "--json")
    assert r.exit_code == 0, r.output
    assert _values(fake) == ["127.0.0.2"]
    assert (MARKER, "TXT") not in fake.rrsets(PROJECT, MZ)
    closed = _values(fake, CLOSED, "TXT")
    assert '"phase=closed"' in closed and any(v.startswith('"by=alice@') for v in closed)
    r = _cli("dns", "plan", "-i", inv, "--detailed-exitcode")
    assert r.exit_code == 0, r.output
    r = _cli("dns", "migrate", "run", API, "-i", inv, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["nothing_to_migrate"] is True, r.output
    assert "nothing to migrate" in r.stderr
    # the closed record is no open migration: not listed, and a new start leaves it
    assert json.loads(_cli("dns", "migrate", "status", "-i", inv, "--json").stdout) == []
    inv = str(_inv(tmp_path, fake, ["127.0.0.3"]))
    r = _cli("dns", "migrate", "start", API, "-i", inv, "--lower-ttl", "1", "--json")
    assert r.exit_code == 0, r.output
    assert '"phase=lowered"' in _values(fake, MARKER, "TXT")
    assert _values(fake, CLOSED, "TXT") == closed
    assert _cli("dns", "migrate", "rollback", API, "-i", inv).exit_code == 0
    assert _values(fake, CLOSED, "TXT") == closed  # a rollback keeps it too


def test_an_inventory_that_cannot_be_written_is_refused_before_the_zone_is_touched(
        fake: FakeCloudDns, tmp_path: Path) -> None:
    p = _inv(tmp_path, fake, ["127.0.0.1"])
    before = dict(fake.rrsets(PROJECT, MZ))
    if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(p)]).returncode:
        pytest.skip("chattr +i is not available here (root is never refused by permissions)")
    try:
        r = _cli("dns", "migrate", "run", API, "--to", "127.0.0.2", "-i", str(p))
        assert r.exit_code == 2, r.output
        assert "cannot be written" in r.output and "--no-write-inventory" in r.output
        assert dict(fake.rrsets(PROJECT, MZ)) == before  # nothing half-done
        r = _cli("dns", "migrate", "run", API, "--to", "127.0.0.2", "-i", str(p),
                 "--lower-ttl", "1", "--no-write-inventory")
        assert r.exit_code == 0, r.output
        assert "--no-write-inventory: the inventory still declares 127.0.0.1" in r.output
    finally:
        subprocess.run(["chattr", "-i", str(p)], check=True)
    r = _cli("dns", "apply", "-i", str(p), "--yes")
    assert r.exit_code == 2 and "api.example.org was moved 127.0.0.1 -> 127.0.0.2 by alice@" in r.output
    assert _values(fake) == ["127.0.0.2"]


def test_an_ad_hoc_to_is_written_back_and_the_plan_is_empty(fake: FakeCloudDns,
                                                            tmp_path: Path) -> None:
    p = _inv(tmp_path, fake, ["127.0.0.1"])
    before = p.read_text()
    r = _cli("dns", "migrate", "run", API, "--to", "127.0.0.2", "-i", str(p), "--lower-ttl", "1",
             "--json")
    assert r.exit_code == 0, r.output
    line = [x.strip() for x in before.splitlines()].index("api:") + 1  # where it is declared
    assert json.loads(r.stdout)["inventory_written"] == f"{p}:{line}"
    assert p.read_text() == before.replace("- 127.0.0.1", "- 127.0.0.2")
    assert _cli("dns", "plan", "-i", str(p), "--detailed-exitcode").exit_code == 0


def test_a_hostile_closed_record_is_refused_for_its_record(fake: FakeCloudDns,
                                                           tmp_path: Path) -> None:
    fake.set_rrset(PROJECT, MZ, CLOSED, "TXT", 300, [
        '"provision-migration=1"', '"phase=closed"', '"name=www.example.org."', '"type=A"',
        '"at=2026-12-01T09:57:00Z"', '"until=2026-12-08T09:57:00Z"', '"by=mallory@x"',
        '"from=127.0.0.1"', '"to=127.0.0.9"'])
    inv = str(_inv(tmp_path, fake, ["127.0.0.2"]))
    r = _cli("dns", "plan", "-i", inv, "--json", "--detailed-exitcode")
    assert r.exit_code == 2, r.output  # bad input from the zone: never "no changes"
    [change] = json.loads(r.stdout)["sections"][0]["changes"]
    assert change["type"] == "held" and "says phase=closed but is malformed" in change["detail"][0]
    r = _cli("dns", "apply", "-i", inv, "--yes")
    assert r.exit_code == 2 and "it names" in r.output, r.output
    assert _values(fake) == ["127.0.0.1"]  # never acted on
    assert (CLOSED, "TXT") in fake.rrsets(PROJECT, MZ)  # and never deleted


def test_apply_refuses_a_revert_before_applying_anything_in_any_zone(
        fake: FakeCloudDns, tmp_path: Path) -> None:
    fake.add_zone(PROJECT, "example-net", "example.net.")
    fake.set_rrset(PROJECT, "example-net", "www.example.net.", "A", 60, ["127.0.0.5"])
    inv = str(_inv(tmp_path, fake, ["127.0.0.1"]))
    r = _cli("dns", "migrate", "run", API, "--to", "127.0.0.2", "-i", inv, "--lower-ttl", "1",
             "--no-write-inventory")
    assert r.exit_code == 0, r.output
    doc = yaml.safe_load(Path(inv).read_text())
    doc["dns"]["zones"]["example.net"] = {
        "provider": "clouddns", "project": PROJECT, "managed_zone": "example-net",
        "endpoint": fake.url, "records": {"www": {"type": "A", "values": ["127.0.0.6"], "ttl": 60}}}
    Path(inv).write_text(yaml.safe_dump(doc))
    r = _cli("dns", "apply", "-i", inv, "--yes")
    assert r.exit_code == 2 and "was moved 127.0.0.1 -> 127.0.0.2" in r.output, r.output
    assert fake.rrsets(PROJECT, "example-net")[("www.example.net.", "A")]["rrdatas"] == ["127.0.0.5"]
    r = _cli("dns", "apply", "-i", inv, "--yes", "--allow-revert", "api")
    assert r.exit_code == 0, r.output
    assert _values(fake) == ["127.0.0.1"] and (CLOSED, "TXT") not in fake.rrsets(PROJECT, MZ)
    assert fake.rrsets(PROJECT, "example-net")[("www.example.net.", "A")]["rrdatas"] == ["127.0.0.6"]


def test_plan_shows_a_cutover_apply_leaves_it_and_no_migrate_applies_it_saying_how_long(
        fake: FakeCloudDns, tmp_path: Path) -> None:
    fake.set_rrset(PROJECT, MZ, API, "A", 3600, ["127.0.0.1"])
    p = _inv(tmp_path, fake, ["127.0.0.2"])
    p.write_text(p.read_text().replace("ttl: 1", "ttl: 3600"))
    r = _cli("dns", "plan", "-i", str(p), "--detailed-exitcode", "--json")
    assert r.exit_code == 3, r.output
    data = json.loads(r.stdout)
    [change] = data["sections"][0]["changes"]
    assert change["type"] == "cutover" and change["subject"] == "api A"
    assert change["detail"][0] == "a cutover: run `provision dns migrate run api`"
    assert data["sections"][0]["notes"] == []  # said once, as the change
    r = _cli("dns", "apply", "-i", str(p), "--yes")
    assert r.exit_code == 0 and "left alone: 1 cutover(s)" in r.output and "(api)" in r.output
    assert _values(fake) == ["127.0.0.1"]
    r = _cli("dns", "apply", "-i", str(p), "--yes", "--no-migrate")
    assert r.exit_code == 0, r.output
    assert "caches may keep the old value (127.0.0.1) for up to 3600 s" in " ".join(r.output.split())
    assert _values(fake) == ["127.0.0.2"]


def test_an_expired_closed_record_is_deleted_by_the_next_apply(fake: FakeCloudDns,
                                                               tmp_path: Path) -> None:
    from provision.dns.migrate import closed as C

    at = C.parse_iso("2026-01-01T00:00:00Z")  # finalized long ago, kept 7 days
    rr = C.closed_rrset(C.Closed(API, "A", at, at + C.DEFAULT_KEEP, "bob@desk",
                                 ("127.0.0.9",), ("127.0.0.1",)))
    fake.set_rrset(PROJECT, MZ, rr.name, "TXT", 300, list(rr.values))
    inv = str(_inv(tmp_path, fake, ["127.0.0.1"]))
    r = _cli("dns", "plan", "-i", inv, "--detailed-exitcode", "--json")
    assert r.exit_code == 3, r.output
    [change] = json.loads(r.stdout)["sections"][0]["changes"]
    assert change["op"] == "-" and change["type"] == "closed-migration"
    assert _cli("dns", "apply", "-i", inv, "--yes").exit_code == 0
    assert (CLOSED, "TXT") not in fake.rrsets(PROJECT, MZ)
    assert _cli("dns", "plan", "-i", inv, "--detailed-exitcode").exit_code == 0


# --- review of issue 21 ---------------------------------------------------------------

def _dual(tmp_path: Path, fake: FakeCloudDns, a: str, aaaa: str) -> str:
    doc = {"version": 1, "dns": {"zones": {"example.org": {
        "provider": "clouddns", "project": PROJECT, "managed_zone": MZ, "endpoint": fake.url,
        "records": {"api": [{"type": "A", "values": [a], "ttl": 1},
                            {"type": "AAAA", "values": [aaaa], "ttl": 1}]}}}}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


def test_a_second_migration_at_the_name_keeps_the_first_ones_closed_record(
        fake: FakeCloudDns, tmp_path: Path) -> None:
    fake.set_rrset(PROJECT, MZ, API, "AAAA", 1, ["::1"])
    inv = _dual(tmp_path, fake, "127.0.0.1", "::1")
    r = _cli("dns", "migrate", "run", API, "--type", "A", "--to", "127.0.0.2", "-i", inv,
             "--lower-ttl", "1", "--no-write-inventory")
    assert r.exit_code == 0, r.output
    inv = _dual(tmp_path, fake, "127.0.0.1", "::2")  # AAAA moved the documented way
    r = _cli("dns", "migrate", "run", API, "--type", "AAAA", "-i", inv, "--lower-ttl", "1")
    assert r.exit_code == 0, r.output
    r = _cli("dns", "apply", "-i", inv, "--yes")
    assert r.exit_code == 2 and "was moved 127.0.0.1 -> 127.0.0.2" in r.output, r.output
    assert _values(fake) == ["127.0.0.2"] and _values(fake, API, "AAAA") == ["::2"]


def test_two_migrations_of_one_type_both_guard(fake: FakeCloudDns, tmp_path: Path) -> None:
    inv = str(_inv(tmp_path, fake, ["127.0.0.1"]))
    r = _cli("dns", "migrate", "run", API, "--to", "127.0.0.2", "-i", inv, "--lower-ttl", "1",
             "--no-write-inventory")
    assert r.exit_code == 0, r.output
    inv = str(_inv(tmp_path, fake, ["127.0.0.3"]))
    r = _cli("dns", "migrate", "run", API, "-i", inv, "--lower-ttl", "1")
    assert r.exit_code == 0, r.output
    closed = _values(fake, CLOSED, "TXT")
    assert '"from=127.0.0.1"' in closed and '"from=127.0.0.2"' in closed, closed
    inv = str(_inv(tmp_path, fake, ["127.0.0.1"]))  # the first migration's old value back
    r = _cli("dns", "apply", "-i", inv, "--yes")
    assert r.exit_code == 2 and "127.0.0.1" in r.output, r.output
    assert _values(fake) == ["127.0.0.3"]


def test_a_junk_marker_holds_its_record_and_plan_and_apply_exit_2(
        fake: FakeCloudDns, tmp_path: Path) -> None:
    for junk in ('"phase=closed"', '"x"'):
        fake.set_rrset(PROJECT, MZ, API, "A", 1, ["127.0.0.66"])
        fake.set_rrset(PROJECT, MZ, MARKER, "TXT", 300, [junk])
        inv = str(_inv(tmp_path, fake, ["127.0.0.1"]))
        r = _cli("dns", "plan", "-i", inv, "--detailed-exitcode")
        assert r.exit_code == 2 and "cannot read" in r.output, (junk, r.output)
        r = _cli("dns", "apply", "-i", inv, "--yes")
        assert r.exit_code == 2 and "cannot read" in r.output, (junk, r.output)
        assert _values(fake) == ["127.0.0.66"]  # held
        assert (MARKER, "TXT") in fake.rrsets(PROJECT, MZ)  # and never deleted


def test_force_does_not_revert_allow_revert_does(fake: FakeCloudDns, tmp_path: Path) -> None:
    inv = str(_inv(tmp_path, fake, ["127.0.0.1"]))
    r = _cli("dns", "migrate", "run", API, "--to", "127.0.0.2", "-i", inv, "--lower-ttl", "1",
             "--no-write-inventory")
    assert r.exit_code == 0, r.output
    r = _cli("dns", "apply", "-i", inv, "--yes", "--force")
    assert r.exit_code == 2 and "--allow-revert api" in r.output, r.output
    assert _values(fake) == ["127.0.0.2"]
    r = _cli("dns", "apply", "-i", inv, "--yes", "--allow-revert", "api")
    assert r.exit_code == 0, r.output
    assert _values(fake) == ["127.0.0.1"]


def test_migrate_run_without_to_refuses_to_revert_a_finished_migration(
        fake: FakeCloudDns, tmp_path: Path) -> None:
    inv = str(_inv(tmp_path, fake, ["127.0.0.1"]))
    r = _cli("dns", "migrate", "run", API, "--to", "127.0.0.2", "-i", inv, "--lower-ttl", "1",
             "--no-write-inventory")
    assert r.exit_code == 0, r.output
    before = dict(fake.rrsets(PROJECT, MZ))
    r = _cli("dns", "migrate", "run", API, "-i", inv, "--lower-ttl", "1")
    assert r.exit_code == 2 and "--allow-revert" in r.output, r.output
    assert dict(fake.rrsets(PROJECT, MZ)) == before
    r = _cli("dns", "migrate", "run", API, "-i", inv, "--lower-ttl", "1", "--allow-revert")
    assert r.exit_code == 0, r.output
    assert _values(fake) == ["127.0.0.1"]


def test_a_revert_found_on_the_replan_after_a_stale_read_is_refused(
        fake: FakeCloudDns, tmp_path: Path) -> None:
    from provision.dns.migrate import closed as C

    fake.set_rrset(PROJECT, MZ, API, "A", 1, ["127.0.0.5"])
    inv = str(_inv(tmp_path, fake, ["127.0.0.1"]))

    def finalized_meanwhile() -> None:  # another machine finished .1 -> .2 between read and write
        now = __import__("time").time()
        rr = C.closed_rrset(C.Closed(API, "A", now, now + C.DEFAULT_KEEP, "bob@desk",
                                     ("127.0.0.1",), ("127.0.0.2",)))
        fake.set_rrset(PROJECT, MZ, rr.name, "TXT", 300, list(rr.values))
        fake.set_rrset(PROJECT, MZ, API, "A", 1, ["127.0.0.2"])

    fake.before_change = finalized_meanwhile
    r = _cli("dns", "apply", "-i", inv, "--yes")
    assert r.exit_code != 0 and "would undo a migration" in r.output, r.output
    assert _values(fake) == ["127.0.0.2"]


def test_an_inventory_edit_made_while_run_waits_is_not_overwritten(
        fake: FakeCloudDns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.dns.migrate import run as R

    p = _inv(tmp_path, fake, ["127.0.0.1"])
    orig = R.finalize

    def finalize(ctx: Any, ttl: int | None) -> Any:
        # a teammate's edit (or a git pull) while `run` waited out the TTL: api -> .7
        p.write_text(p.read_text().replace("- 127.0.0.1", "- 127.0.0.7"))
        return orig(ctx, ttl)

    monkeypatch.setattr(R, "finalize", finalize)
    r = _cli("dns", "migrate", "run", API, "--to", "127.0.0.2", "-i", str(p), "--lower-ttl", "1")
    assert r.exit_code == 2 and "edited meanwhile" in r.output, r.output
    assert "- 127.0.0.7" in p.read_text()  # the teammate's value stays
    monkeypatch.setattr(R, "finalize", orig)
    # run again: the inventory (now .7, neither end) is loaded anew: the third value is refused
    r = _cli("dns", "migrate", "run", API, "-i", str(p), "--lower-ttl", "1")
    assert r.exit_code == 2 and "the inventory now declares 127.0.0.7" in r.output, r.output
    assert _values(fake) == ["127.0.0.2"]
    assert "- 127.0.0.7" in p.read_text()


def test_an_open_marker_with_forged_values_is_never_rolled_back_to_nor_printed_raw(
        fake: FakeCloudDns, tmp_path: Path) -> None:
    fake.set_rrset(PROJECT, MZ, MARKER, "TXT", 300, [
        '"provision-migration=1"', '"phase=lowered"', '"type=A"', '"ttl=1"', '"lower=1"',
        '"started=2026-12-01T09:00:00Z"', '"at=2026-12-01T09:00:00Z"',
        '"from=[link=http://evil/]x[/link]\x1b[31m"', '"to=127.0.0.2"'])
    inv = str(_inv(tmp_path, fake, ["127.0.0.1"]))
    before = dict(fake.rrsets(PROJECT, MZ))
    r = _cli("dns", "migrate", "rollback", API, "-i", inv)
    assert r.exit_code != 0, r.output
    assert dict(fake.rrsets(PROJECT, MZ)) == before  # nothing written from the marker
    assert ("cannot read" in r.output or "is refused" in r.output) and "\x1b" not in r.output, repr(r.output)
    r = _cli("dns", "plan", "-i", inv, "--detailed-exitcode")
    assert r.exit_code == 2 and "cannot read" in r.output, r.output
    assert "\x1b" not in r.output and "[link=" in r.output, repr(r.output)  # shown, not obeyed


def test_a_target_the_closed_record_could_not_hold_is_refused_before_anything(
        fake: FakeCloudDns, tmp_path: Path) -> None:
    inv = str(_inv(tmp_path, fake, ["127.0.0.1"]))
    before = dict(fake.rrsets(PROJECT, MZ))
    many = [a for i in range(2, 19) for a in ("--to", f"127.0.0.{i}")]  # 17 values
    r = _cli("dns", "migrate", "run", API, *many, "-i", inv, "--lower-ttl", "1",
             "--no-write-inventory")
    assert r.exit_code == 2 and "1 to 16" in r.output, r.output
    assert dict(fake.rrsets(PROJECT, MZ)) == before


def test_no_closed_record_kept_says_apply_changes_it_back(fake: FakeCloudDns,
                                                          tmp_path: Path) -> None:
    p = _inv(tmp_path, fake, ["127.0.0.1"], closed_migration_days=0)
    if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(p)]).returncode:
        pytest.skip("chattr +i is not available here (root is never refused by permissions)")
    try:
        r = _cli("dns", "migrate", "run", API, "--to", "127.0.0.2", "-i", str(p))
    finally:
        subprocess.run(["chattr", "-i", str(p)], check=True)
    assert r.exit_code == 2, r.output
    assert "for 0 days" not in r.output and "closed_migration_days is 0" in r.output, r.output
