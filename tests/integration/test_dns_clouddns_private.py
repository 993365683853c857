"""Cloud DNS private zones through the real google-cloud-dns client against the local v1
fake: a private managed zone visible to a network, plan/apply; a zone whose visibility
or networks differ from the inventory's is refused (exit 2) before any change is sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from provision.cli import main
from tests.support.clouddns_fake import FakeCloudDns, isolated_fake

PROJECT, MZ, ZONE = "lab-project", "internal", "internal.example."
NET = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/global/networks/gpu-vpc"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloudDns]:
    with isolated_fake(monkeypatch, PROJECT, "public-one", "public.example.",
                       pending_polls=0) as f:
        f.add_zone(PROJECT, MZ, ZONE, visibility="private", networks=(NET,))
        yield f


def _inventory(tmp_path: Path, fake: FakeCloudDns, **zone: Any) -> Path:
    doc = {"version": 1, "dns": {"zones": {ZONE.rstrip("."): {
        "provider": "clouddns", "project": PROJECT, "managed_zone": MZ, "endpoint": fake.url,
        "records": {"gpu-worker-1": {"type": "A", "values": ["10.0.0.11"]}}, **zone}}}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    return p


def _cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("network", ["gpu-vpc", f"projects/{PROJECT}/global/networks/gpu-vpc",
                                     NET])
def test_a_private_zone_plan_apply_then_no_changes(fake: FakeCloudDns, tmp_path: Path,
                                                   network: str) -> None:
    inv = _inventory(tmp_path, fake, visibility="private", networks=[network])
    r = _cli("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert r.exit_code == 3, r.output
    assert "+ gpu-worker-1 A 10.0.0.11" in r.output
    r = _cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 0, r.output
    got = fake.rrsets(PROJECT, MZ)[(f"gpu-worker-1.{ZONE}", "A")]
    assert got["rrdatas"] == ["10.0.0.11"]
    r = _cli("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize(("zone", "needle"), [
    ({}, "the inventory declares a public zone, but managed zone internal"),
    ({"visibility": "private", "networks": ["other-vpc"]},
     f"is not attached to projects/{PROJECT}/global/networks/other-vpc"),
    ({"visibility": "private", "networks": ["projects/elsewhere-1/global/networks/gpu-vpc"]},
     "projects/elsewhere-1/global/networks/gpu-vpc"),
])
def test_a_zone_that_differs_is_refused_and_nothing_is_sent(
        fake: FakeCloudDns, tmp_path: Path, zone: dict[str, Any], needle: str) -> None:
    inv = _inventory(tmp_path, fake, **zone)
    r = _cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 2, r.output
    assert needle in r.output and "Traceback" not in r.output
    assert not [1 for m, _ in fake.requests if m == "POST"]
    assert (f"gpu-worker-1.{ZONE}", "A") not in fake.rrsets(PROJECT, MZ)


def test_a_public_zone_declared_private_is_refused(fake: FakeCloudDns, tmp_path: Path) -> None:
    doc = {"version": 1, "dns": {"zones": {"public.example": {
        "provider": "clouddns", "project": PROJECT, "managed_zone": "public-one",
        "endpoint": fake.url, "visibility": "private", "networks": ["gpu-vpc"],
        "records": {"a": {"type": "A", "values": ["10.0.0.1"]}}}}}}
    inv = tmp_path / "inv.yml"
    inv.write_text(yaml.safe_dump(doc))
    r = _cli("dns", "plan", "-i", str(inv))
    assert r.exit_code == 2, r.output
    assert "the inventory declares a private zone, but managed zone public-one" in r.output
