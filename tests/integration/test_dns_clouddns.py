"""The clouddns provider through the real google-cloud-dns client, against a local server
that follows the Cloud DNS v1 REST API (tests/support/clouddns_fake.py) on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from provision.cli import main
from tests.support.clouddns_fake import FakeCloudDns, inventory_file, isolated_fake

PROJECT, MZ, ZONE = "lab-project", "example-org", "example.org."


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloudDns]:
    with isolated_fake(monkeypatch, PROJECT, MZ, ZONE, page_size=50, pending_polls=2) as f:
        yield f


def _inventory(tmp_path: Path, fake: FakeCloudDns, records: dict[str, Any]) -> Path:
    return inventory_file(tmp_path, fake, PROJECT, MZ, records)


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


RECORDS = {"api": {"type": "A", "values": ["203.0.113.50"], "ttl": 300},
           "www": {"type": "CNAME", "value": "api.example.org"}}


def test_plan_apply_polls_pending_until_done_then_no_changes(fake: FakeCloudDns, tmp_path: Path) -> None:
    inv = _inventory(tmp_path, fake, RECORDS)
    r = _cli("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert r.exit_code == 3, r.output
    assert "+ www CNAME api.example.org. (ttl 300)" in r.output
    r = _cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 0, r.output
    polls = [p for m, p in fake.requests if m == "GET" and "/changes/1" in p]
    assert len(polls) == 3  # pending, pending, done
    assert all("prettyPrint=false" in p for _, p in fake.requests)
    sets = fake.rrsets(PROJECT, MZ)
    assert sets[("api.example.org.", "A")]["rrdatas"] == ["203.0.113.50"]
    assert sets[("www.example.org.", "CNAME")]["rrdatas"] == ["api.example.org."]
    r = _cli("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert r.exit_code == 0 and "No changes." in r.output, r.output


def test_a_change_holds_the_exact_old_rrset_under_deletions(fake: FakeCloudDns, tmp_path: Path) -> None:
    # ttl 120: at most cutover_above_ttl, so a plain change (not left for dns migrate)
    fake.set_rrset(PROJECT, MZ, "api.example.org.", "A", 120, ["192.0.2.1", "192.0.2.2"])
    inv = _inventory(tmp_path, fake, {"api": RECORDS["api"]})
    r = _cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 0, r.output
    body = fake.bodies[-1]
    old = next(d for d in body["deletions"] if d["type"] == "A")
    assert (int(old["ttl"]), sorted(old["rrdatas"])) == (120, ["192.0.2.1", "192.0.2.2"])
    assert fake.rrsets(PROJECT, MZ)[("api.example.org.", "A")]["rrdatas"] == ["203.0.113.50"]


def test_rrsets_are_read_over_several_pages(fake: FakeCloudDns, tmp_path: Path) -> None:
    for i in range(120):  # others' records: read, never touched
        fake.set_rrset(PROJECT, MZ, f"h{i:03d}.example.org.", "A", 300, [f"10.0.0.{i + 1}"])
    inv = _inventory(tmp_path, fake, RECORDS)
    r = _cli("dns", "plan", "-i", str(inv), "--json")
    assert r.exit_code == 0, r.output
    pages = [p for m, p in fake.requests if m == "GET" and "/rrsets" in p]
    assert len(pages) == 3 and "pageToken=50" in pages[1] and "pageToken=100" in pages[2]
    assert '"records_read": 122' in r.output
    assert '"add": 2' in r.output and '"destroy": 0' in r.output


def test_a_stale_deletion_gets_412_and_is_replanned_once(fake: FakeCloudDns, tmp_path: Path) -> None:
    fake.set_rrset(PROJECT, MZ, "api.example.org.", "A", 300, ["192.0.2.1"])
    fake.before_change = lambda: fake.set_rrset(PROJECT, MZ, "api.example.org.", "A", 300, ["192.0.2.7"])
    inv = _inventory(tmp_path, fake, {"api": RECORDS["api"]})
    r = _cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 0, r.output
    assert "re-reading the changed zone once" in r.output
    posts = [p for m, p in fake.requests if m == "POST"]
    assert len(posts) == 2
    assert fake.bodies[1]["deletions"][0]["rrdatas"] == ["192.0.2.7"]  # re-planned from the new read
    assert fake.rrsets(PROJECT, MZ)[("api.example.org.", "A")]["rrdatas"] == ["203.0.113.50"]


def test_a_second_412_fails_clearly(fake: FakeCloudDns, tmp_path: Path) -> None:
    fake.set_rrset(PROJECT, MZ, "api.example.org.", "A", 300, ["192.0.2.1"])
    counter = iter(range(2, 100))

    def meddle() -> None:
        fake.set_rrset(PROJECT, MZ, "api.example.org.", "A", 300, [f"192.0.2.{next(counter)}"])
        fake.before_change = meddle

    fake.before_change = meddle
    inv = _inventory(tmp_path, fake, {"api": RECORDS["api"]})
    r = _cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 1, r.output
    assert "HTTP 412" in r.output and "giving up" in r.output
    assert "Traceback" not in r.output
    assert len([1 for m, _ in fake.requests if m == "POST"]) == 2


def test_a_missing_managed_zone_is_a_clear_failure(fake: FakeCloudDns, tmp_path: Path) -> None:
    inv = _inventory(tmp_path, fake, RECORDS)
    inv.write_text(inv.read_text().replace(f"managed_zone: {MZ}", "managed_zone: nope"))
    r = _cli("dns", "plan", "-i", str(inv))
    assert r.exit_code == 1, r.output
    assert "not found" in r.output and "managed zone nope" in r.output


def _many(n: int, prefix: str = "192.0.2") -> dict[str, Any]:
    return {f"h{i}": {"type": "A", "values": [f"{prefix}.{i + 1}"]} for i in range(n)}


def test_the_30_percent_guard_needs_force(fake: FakeCloudDns, tmp_path: Path) -> None:
    inv = _inventory(tmp_path, fake, _many(10))
    assert _cli("dns", "apply", "-i", str(inv), "--yes").exit_code == 0
    moved = {**_many(10), **{f"h{i}": {"type": "A", "values": [f"198.51.100.{i + 1}"]} for i in range(4)}}
    inv = _inventory(tmp_path, fake, moved)
    r = _cli("dns", "plan", "-i", str(inv))
    assert r.exit_code == 0 and "4 of the 10 managed records" in r.output, r.output
    posts = len([1 for m, _ in fake.requests if m == "POST"])
    r = _cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 2 and "--force" in r.output, r.output
    assert len([1 for m, _ in fake.requests if m == "POST"]) == posts  # nothing sent
    r = _cli("dns", "apply", "-i", str(inv), "--yes", "--force")
    assert r.exit_code == 0, r.output
    assert fake.rrsets(PROJECT, MZ)[("h0.example.org.", "A")]["rrdatas"] == ["198.51.100.1"]


def test_usage_errors_exit_2(fake: FakeCloudDns, tmp_path: Path) -> None:
    inv = _inventory(tmp_path, fake, RECORDS)
    r = _cli("dns", "apply", "-i", str(inv))  # no terminal, no --yes
    assert r.exit_code == 2 and "--yes" in r.output, r.output
    r = _cli("dns", "plan", "-i", str(inv), "--zone", "nope.org")
    assert r.exit_code == 2 and "unknown zone 'nope.org'" in r.output, r.output
    empty = tmp_path / "empty.yml"
    empty.write_text("version: 1\n")
    r = _cli("dns", "plan", "-i", str(empty))
    assert r.exit_code == 2 and "no dns.zones" in r.output, r.output
    assert not [1 for m, _ in fake.requests if m == "POST"]


def test_a_cname_beside_other_data_in_the_zone_is_refused(fake: FakeCloudDns, tmp_path: Path) -> None:
    fake.set_rrset(PROJECT, MZ, "www.example.org.", "TXT", 300, ['"someone else"'])
    inv = _inventory(tmp_path, fake, RECORDS)
    r = _cli("dns", "plan", "-i", str(inv))
    assert r.exit_code == 1 and "a CNAME must be alone" in r.output, r.output
    r = _cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 1
    assert not [1 for m, _ in fake.requests if m == "POST"]


def test_one_rrset_and_the_nameservers(fake: FakeCloudDns) -> None:
    from provision.dns.providers.clouddns import CloudDnsProvider
    from provision.dns.rrset import rrset

    fake.set_rrset(PROJECT, MZ, "one.example.org.", "A", 42, ["192.0.2.42"])
    p = CloudDnsProvider(ZONE, project=PROJECT, managed_zone=MZ, endpoint=fake.url)
    assert p.get_rrset("one.example.org.", "A") == rrset("one.example.org.", "A", 42, ["192.0.2.42"])
    assert p.get_rrset("two.example.org.", "A") is None
    assert p.nameservers() == [("ns-cloud-a1.googledomains.com.", None),
                               ("ns-cloud-a2.googledomains.com.", None)]
