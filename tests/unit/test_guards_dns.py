"""The DNS change-fraction guard (30 % of a zone's managed records, zones of 10 or more),
proven at each place it acts: the pure plan (what counts, where the line is), the CLI
(`dns plan` says it, `dns apply` refuses without --force and sends nothing), and the
re-plan after a stale read (the zone changed under us: the new plan is guarded too)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from clouddns_fake import FakeCloudDns, isolated_fake

from provision.cli import main
from provision.dns import records as R
from provision.dns.records import RRset, absolute, marker_rrset, plan_zone, rrset

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
    assert R.GUARD_FRACTION == 0.30 and R.GUARD_MIN_RECORDS == 10


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


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloudDns]:
    with isolated_fake(monkeypatch, PROJECT, MZ, Z, page_size=50, pending_polls=0) as f:
        yield f


def _inventory(tmp_path: Path, fake: FakeCloudDns, records: dict[str, Any]) -> Path:
    doc = {"version": 1, "dns": {"zones": {"example.org": {
        "provider": "clouddns", "project": PROJECT, "managed_zone": MZ, "endpoint": fake.url,
        "records": records}}}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    return p


def _records(n: int, moved: int = 0) -> dict[str, Any]:
    return {f"h{i}": {"type": "A", "values": ["198.51.100.1" if i < moved else f"192.0.2.{i + 1}"]}
            for i in range(n)}


def _posts(fake: FakeCloudDns) -> int:
    return sum(1 for m, _ in fake.requests if m == "POST")


def test_apply_refuses_without_force_and_sends_nothing(fake: FakeCloudDns, tmp_path: Path) -> None:
    cli = CliRunner()
    assert cli.invoke(main, ["dns", "apply", "-i", str(_inventory(tmp_path, fake, _records(10))),
                             "--yes"]).exit_code == 0
    inv = str(_inventory(tmp_path, fake, _records(10, moved=4)))
    r = cli.invoke(main, ["dns", "plan", "-i", inv, "--json"])
    assert r.exit_code == 0 and '"guard": "the plan changes or deletes 4 of the 10' in r.output
    r = cli.invoke(main, ["dns", "plan", "-i", inv, "--force"])
    assert "(--force given)" in r.output
    before = _posts(fake)
    r = cli.invoke(main, ["dns", "apply", "-i", inv, "--yes"])
    assert r.exit_code == 2 and "pass --force to apply it" in r.output, r.output
    assert _posts(fake) == before
    assert fake.rrsets(PROJECT, MZ)[("h0.example.org.", "A")]["rrdatas"] == ["192.0.2.1"]
    # 3 of 10 goes through without --force
    r = cli.invoke(main, ["dns", "apply", "-i", str(_inventory(tmp_path, fake, _records(10, 3))),
                          "--yes"])
    assert r.exit_code == 0, r.output


def test_a_replan_after_a_stale_read_is_guarded_too(fake: FakeCloudDns, tmp_path: Path) -> None:
    """The first plan changes 3 of 10 (allowed). Before it lands, someone changes h0 (our
    deletion is stale: 412) and h3, h4: the re-plan would change 5 of 10, and must not be
    applied without --force."""
    cli = CliRunner()
    assert cli.invoke(main, ["dns", "apply", "-i", str(_inventory(tmp_path, fake, _records(10))),
                             "--yes"]).exit_code == 0

    def meddle() -> None:
        fake.before_change = None
        for i in (0, 3, 4):
            fake.set_rrset(PROJECT, MZ, f"h{i}.example.org.", "A", 300, ["203.0.113.9"])

    fake.before_change = meddle
    inv = str(_inventory(tmp_path, fake, _records(10, moved=3)))
    before = _posts(fake)
    r = cli.invoke(main, ["dns", "apply", "-i", inv, "--yes"])
    assert r.exit_code == 1, r.output
    assert "the zone changed while applying, and the new plan needs --force" in r.output
    assert _posts(fake) == before + 1, "only the first (stale, refused) change was sent"
    assert fake.rrsets(PROJECT, MZ)[("h3.example.org.", "A")]["rrdatas"] == ["203.0.113.9"]
    fake.before_change = meddle
    r = cli.invoke(main, ["dns", "apply", "-i", inv, "--yes", "--force"])
    assert r.exit_code == 0, r.output
    assert fake.rrsets(PROJECT, MZ)[("h3.example.org.", "A")]["rrdatas"] == ["192.0.2.4"]
