"""The wait between lowering and switching (run_all), against the Cloud DNS fake
(tests/support/clouddns_fake.py) with a fake clock: the old TTL is waited out, a countdown
that does not wait enough cannot switch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from provision.dns.migrate.run import Ctx, find_zone, run_all, start
from provision.dns.migrate.store import JournalStore
from provision.dns.propagation import Unverifiable
from provision.errors import UsageError
from provision.inventory import load_inventory
from tests.support.clouddns_fake import FakeCloudDns, isolated_fake
from tests.unit.test_guards_migrate import NAME, T0, ZONE

PROJECT, MZ = "lab-project", "example-org"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloudDns]:
    with isolated_fake(monkeypatch, PROJECT, MZ, ZONE, page_size=50, pending_polls=0) as f:
        f.set_rrset(PROJECT, MZ, NAME, "A", 300, ["127.0.0.1"])
        yield f


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def _ctx(tmp_path: Path, fake: FakeCloudDns, clock: Clock) -> Ctx:
    doc = {"version": 1, "dns": {"zones": {"example.org": {
        "provider": "clouddns", "project": PROJECT, "managed_zone": MZ, "endpoint": fake.url,
        "records": {}}}}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    inv = load_inventory(p)
    zone, name = find_zone(inv, NAME)
    return Ctx(inv, zone, name, JournalStore(tmp_path / "migrations"), now=clock)


def _record(fake: FakeCloudDns) -> tuple[int, list[str]]:
    rr = fake.rrsets(PROJECT, MZ)[(NAME, "A")]
    return int(rr["ttl"]), rr["rrdatas"]


def test_run_waits_out_the_old_ttl_before_switching(fake: FakeCloudDns, tmp_path: Path) -> None:
    clock = Clock()
    asked: list[tuple[float, tuple[int, list[str]]]] = []

    def countdown(seconds: float, what: str) -> None:
        asked.append((seconds, _record(fake)))  # what the zone holds while we wait
        clock.t += max(0.0, seconds)

    ctx = _ctx(tmp_path, fake, clock)
    j, _ = run_all(ctx, ["127.0.0.2"], 60, None, [], None, 5.0, countdown)
    assert asked[0] == (300.0, (60, ["127.0.0.1"])), "waited the whole old TTL on the old value"
    assert not j.forced and ctx.store.load(NAME) is None  # finished and closed
    assert j.switched_at is not None and j.lowered_at is not None
    assert j.switched_at - j.lowered_at >= 300
    assert _record(fake)[1] == ["127.0.0.2"]


@pytest.mark.parametrize("waited", [0.0, 150.0, 299.0])
def test_a_countdown_that_does_not_wait_enough_cannot_switch(
        fake: FakeCloudDns, tmp_path: Path, waited: float) -> None:
    clock = Clock()

    def short(seconds: float, what: str) -> None:
        clock.t += waited

    ctx = _ctx(tmp_path, fake, clock)
    with pytest.raises(UsageError, match="cutover refused"):
        run_all(ctx, ["127.0.0.2"], 60, None, [], None, 5.0, short)
    assert _record(fake) == (60, ["127.0.0.1"]), "lowered, never switched"
    j = ctx.store.load(NAME)
    assert j is not None and j.phase == "lowered" and j.switched_at is None


def test_a_public_zone_whose_provider_names_no_nameserver_is_refused_before_any_change(
        fake: FakeCloudDns, tmp_path: Path) -> None:
    # nothing could verify what is served: the migration went on unverified (every
    # wait "served" at once), now it is refused before the TTL is lowered
    fake.zones[(PROJECT, MZ)]["zone"]["nameServers"] = []
    before = _record(fake)
    with pytest.raises(Unverifiable, match="names no nameserver"):
        start(_ctx(tmp_path, fake, Clock()), ["127.0.0.2"], 60)
    assert _record(fake) == before
    assert not (tmp_path / "migrations").exists() or not any((tmp_path / "migrations").iterdir())
