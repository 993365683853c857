"""The DNS guards end to end against the Cloud DNS fake (tests/support/clouddns_fake.py):
apply refuses without --force and sends nothing; a replan after a stale read is guarded too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from provision.cli import main
from tests.support.clouddns_fake import FakeCloudDns, inventory_file, isolated_fake
from tests.unit.test_guards_dns import Z

# --- the CLI and the re-plan, against the local Cloud DNS server ------------------------------

PROJECT, MZ = "lab-project", "example-org"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloudDns]:
    with isolated_fake(monkeypatch, PROJECT, MZ, Z, page_size=50, pending_polls=0) as f:
        yield f


def _inventory(tmp_path: Path, fake: FakeCloudDns, records: dict[str, Any]) -> Path:
    return inventory_file(tmp_path, fake, PROJECT, MZ, records)


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
