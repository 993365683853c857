"""Private hosted zones on moto over HTTP: a private zone associated with a VPC beside a
public zone of the same name; each inventory's changes land in its own zone, and a zone
that is not what the inventory declares is refused (exit 2) before anything is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from click.testing import CliRunner, Result

from provision.cli import main
from provision.dns.providers.route53 import Route53Provider
from provision.dnsdata.visibility import Wanted, ZoneMismatch

ZONE = "internal.example."
VPC_REGION = "eu-west-1"


def _cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def zones(aws_env: str) -> dict[str, Any]:
    """A VPC in eu-west-1, a second one not associated, the public zone and the private."""
    ec2 = boto3.client("ec2", region_name=VPC_REGION)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    other = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    r53 = boto3.client("route53", region_name="us-east-1")
    public = r53.create_hosted_zone(Name=ZONE, CallerReference="public")["HostedZone"]["Id"]
    private = r53.create_hosted_zone(
        Name=ZONE, CallerReference="private", HostedZoneConfig={"PrivateZone": True},
        VPC={"VPCRegion": VPC_REGION, "VPCId": vpc})["HostedZone"]["Id"]
    return {"url": aws_env, "r53": r53, "vpc": vpc, "other": other,
            "public": public, "private": private}


def _inventory(tmp_path: Path, z: dict[str, Any], name: str, zone: dict[str, Any],
               records: dict[str, Any]) -> Path:
    doc = {"version": 1, "aws": {"region": "us-east-1", "endpoint_url": z["url"]},
           "dns": {"zones": {ZONE.rstrip("."): {"provider": "route53", **zone,
                                                "records": records}}}}
    p = tmp_path / f"{name}.yml"
    p.write_text(yaml.safe_dump(doc))
    return p


def _private(z: dict[str, Any], *vpcs: tuple[str, str]) -> dict[str, Any]:
    return {"visibility": "private",
            "vpcs": [{"id": i, "region": r} for i, r in (vpcs or [(z["vpc"], VPC_REGION)])]}


def _a(z: dict[str, Any], zone_id: str) -> dict[str, tuple[str, ...]]:
    sets = z["r53"].list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
    return {s["Name"]: tuple(v["Value"] for v in s["ResourceRecords"])
            for s in sets if s["Type"] == "A"}


def test_each_change_lands_in_its_own_zone(zones: dict[str, Any], tmp_path: Path) -> None:
    priv = _inventory(tmp_path, zones, "private", _private(zones),
                      {"gpu-worker-1": {"type": "A", "values": ["10.0.0.11"]}})
    pub = _inventory(tmp_path, zones, "public", {},
                     {"www": {"type": "A", "values": ["203.0.113.80"]}})
    for inv, name in ((priv, "gpu-worker-1"), (pub, "www")):
        r = _cli("dns", "plan", "-i", str(inv), "--detailed-exitcode")
        assert r.exit_code == 3, r.output
        assert f"+ {name} A" in r.output
        r = _cli("dns", "apply", "-i", str(inv), "--yes")
        assert r.exit_code == 0, r.output
    assert _a(zones, zones["private"]) == {f"gpu-worker-1.{ZONE}": ("10.0.0.11",)}
    assert _a(zones, zones["public"]) == {f"www.{ZONE}": ("203.0.113.80",)}
    for inv in (priv, pub):  # each reads back its own zone: nothing left to do
        r = _cli("dns", "plan", "-i", str(inv), "--detailed-exitcode")
        assert r.exit_code == 0, r.output
    # a zone named by id is read and compared too (moto's ids do not look like AWS's, so
    # the provider is made here rather than from an inventory's hosted_zone_id)
    on_vpc = Wanted("private", frozenset({f"{zones['vpc']} in {VPC_REGION}"}))
    for zid, want, ok in ((zones["private"], on_vpc, True), (zones["public"], on_vpc, False),
                          (zones["private"], Wanted(), False)):
        p = Route53Provider(ZONE, hosted_zone_id=zid, endpoint_url=zones["url"], want=want)
        if ok:
            assert any(rr.name == f"gpu-worker-1.{ZONE}" for rr in p.list_rrsets())
        else:
            with pytest.raises(ZoneMismatch):
                p.list_rrsets()


def _refused(z: dict[str, Any], inv: Path, *needles: str, apply: bool = False) -> None:
    before = (_a(z, z["public"]), _a(z, z["private"]))
    r = _cli("dns", *(("apply", "--yes") if apply else ("plan",)), "-i", str(inv))
    assert r.exit_code == 2, r.output
    for n in needles:
        assert n in r.output, r.output
    assert "Traceback" not in r.output
    assert (_a(z, z["public"]), _a(z, z["private"])) == before  # nothing applied


RECORDS = {"gpu-worker-1": {"type": "A", "values": ["10.0.0.11"]}}


def test_a_zone_that_is_not_the_declared_one_is_refused(
        zones: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vpc, other = zones["vpc"], zones["other"]
    # the VPC is checked in the region the inventory names (EC2 DescribeVpcs there)
    inv = _inventory(tmp_path, zones, "region", _private(zones, (vpc, "us-west-2")), RECORDS)
    _refused(zones, inv, f"VPC {vpc} is not in region us-west-2", ZONE, apply=True)
    # a private zone of that name exists, attached to another VPC than the declared one
    inv = _inventory(tmp_path, zones, "other", _private(zones, (other, VPC_REGION)), RECORDS)
    _refused(zones, inv, f"no private hosted zone of that name is attached to {other} in "
             f"{VPC_REGION}", f"{vpc} in {VPC_REGION}", apply=True)
    inv = _inventory(tmp_path, zones, "both", _private(
        zones, (vpc, VPC_REGION), (other, VPC_REGION)), RECORDS)
    _refused(zones, inv, f"is not attached to {other} in {VPC_REGION}")
    # a visibility that differs from the only zone of that name
    r53 = zones["r53"]
    r53.create_hosted_zone(Name="vpc-only.example.", CallerReference="p2",
                           HostedZoneConfig={"PrivateZone": True},
                           VPC={"VPCRegion": VPC_REGION, "VPCId": vpc})
    doc = {"version": 1, "aws": {"region": "us-east-1", "endpoint_url": zones["url"]},
           "dns": {"zones": {"vpc-only.example": {"provider": "route53", "records": RECORDS}}}}
    inv = tmp_path / "public-declared.yml"
    inv.write_text(yaml.safe_dump(doc))
    _refused(zones, inv, "the inventory declares a public zone", "is private")
    r53.create_hosted_zone(Name="public-only.example.", CallerReference="p3")
    doc["dns"] = {"zones": {"public-only.example": {"provider": "route53", **_private(zones),
                                                    "records": RECORDS}}}
    inv.write_text(yaml.safe_dump(doc))
    _refused(zones, inv, "the inventory declares a private zone", "is public")
    # no resolver inside the VPC is listed: dns check says it cannot verify (exit 1)
    inv = _inventory(tmp_path, zones, "check", _private(zones), RECORDS)
    r = _cli("dns", "check", "gpu-worker-1", "-i", str(inv))
    assert r.exit_code == 1, r.output
    assert "private zone" in r.output and "dns.resolvers lists none" in r.output
    # nor does a cutover start there: refused before the TTL is lowered or a journal kept
    zones["r53"].change_resource_record_sets(HostedZoneId=zones["private"], ChangeBatch={
        "Changes": [{"Action": "CREATE", "ResourceRecordSet": {
            "Name": f"gpu-worker-1.{ZONE}", "Type": "A", "TTL": 3600,
            "ResourceRecords": [{"Value": "10.0.0.10"}]}}]})
    monkeypatch.setenv("PROVISION_STATE_DIR", str(tmp_path / "state"))
    before = zones["r53"].list_resource_record_sets(HostedZoneId=zones["private"])
    r = _cli("dns", "migrate", "start", "gpu-worker-1", "-i", str(inv))
    assert r.exit_code == 1, r.output
    assert "dns.resolvers lists none" in r.output
    after = zones["r53"].list_resource_record_sets(HostedZoneId=zones["private"])
    assert after["ResourceRecordSets"] == before["ResourceRecordSets"]
    assert not list((tmp_path / "state").rglob("*.json"))
