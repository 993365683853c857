"""Shared zones through the real CLI against the Cloud DNS fake (127.0.0.1): a migration
of a record another owner's marker claims is refused before anything is sent, and two
inventories with different owner ids each keep to their own records."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from tests.support.clouddns_fake import FakeCloudDns, isolated_fake

PROJECT, MZ, ZONE = "lab-project", "example-org", "example.org."


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeCloudDns]:
    monkeypatch.setenv("PROVISION_STATE_DIR", str(tmp_path / "state"))
    with isolated_fake(monkeypatch, PROJECT, MZ, ZONE, page_size=50, pending_polls=0) as f:
        yield f


def _inv(path: Path, fake: FakeCloudDns, owner: str, records: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump({"version": 1, "dns": {"owner": owner, "zones": {
        "example.org": {"provider": "clouddns", "project": PROJECT, "managed_zone": MZ,
                        "endpoint": fake.url, "records": records}}}}))
    return str(path)


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _posts(fake: FakeCloudDns) -> int:
    return sum(1 for m, _ in fake.requests if m == "POST")


def test_two_inventories_share_a_zone_and_keep_to_their_own(fake: FakeCloudDns,
                                                            tmp_path: Path) -> None:
    a = _inv(tmp_path / "a.yml", fake, "team-a",
             {"api": {"type": "A", "values": ["127.0.0.1"], "ttl": 300}})
    b = _inv(tmp_path / "b.yml", fake, "team-b",
             {"db": {"type": "A", "values": ["127.0.0.2"], "ttl": 300}})
    assert _cli("dns", "apply", "-i", a, "--yes").exit_code == 0
    assert _cli("dns", "apply", "-i", b, "--yes").exit_code == 0
    sets = fake.rrsets(PROJECT, MZ)
    assert sets[("_provision.api.example.org.", "TXT")]["rrdatas"] == ['"provision owns A owner=team-a"']
    assert sets[("_provision.db.example.org.", "TXT")]["rrdatas"] == ['"provision owns A owner=team-b"']
    # b plans no deletion of a's record, though b does not declare it
    r = _cli("dns", "plan", "-i", b, "--detailed-exitcode")
    assert r.exit_code == 0, r.output
    # b declaring a's record with other values: refused, naming team-a, nothing sent
    sent = _posts(fake)
    b2 = _inv(tmp_path / "b.yml", fake, "team-b", {
        "db": {"type": "A", "values": ["127.0.0.2"], "ttl": 300},
        "api": {"type": "A", "values": ["127.0.0.9"], "ttl": 300}})
    r = _cli("dns", "apply", "-i", b2, "--yes")
    assert r.exit_code == 1, r.output
    assert "owner id 'team-a'" in " ".join(r.output.split())
    assert _posts(fake) == sent
    assert sets[("api.example.org.", "A")]["rrdatas"] == ["127.0.0.1"]
    # and moving it with a migration is refused the same way, before anything is sent
    r = _cli("dns", "migrate", "start", "api.example.org", "--to", "127.0.0.9", "-i", b2)
    assert r.exit_code == 2, r.output
    assert "owner id 'team-a'" in " ".join(r.output.split())
    assert _posts(fake) == sent
    # its own owner still moves it
    a2 = _inv(tmp_path / "a.yml", fake, "team-a",
              {"api": {"type": "A", "values": ["127.0.0.3"], "ttl": 300}})
    assert _cli("dns", "apply", "-i", a2, "--yes").exit_code == 0
    assert fake.rrsets(PROJECT, MZ)[("api.example.org.", "A")]["rrdatas"] == ["127.0.0.3"]
