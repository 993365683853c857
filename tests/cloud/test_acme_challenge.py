"""The DNS-01 challenge record through Route53 (moto, real HTTP on 127.0.0.1) and Cloud
DNS (tests/support/clouddns_fake.py on 127.0.0.1), up to the TXT record and its removal:
written with its ownership marker, removed with it, a TXT of someone else's left alone,
the zone's CAA records read for the CAA decision. (Propagation to their name servers is
not faked: the lab covers waiting on every authoritative server.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from provision.acme.dns01 import ChallengeError, Dns01
from provision.inventory import load_inventory
from tests.support.clouddns_fake import FakeCloudDns, inventory_file, isolated_fake

NAME = "api.example.org"
TXT = "_acme-challenge.api.example.org."
MARKER = "_provision._acme-challenge.api.example.org."


def _route53(tmp_path: Path, url: str) -> Dns01:
    doc = {"version": 1, "aws": {"region": "us-east-1", "endpoint_url": url},
           "dns": {"owner": "certs", "zones": {"example.org": {"provider": "route53"}}}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    return Dns01(load_inventory(p))


@pytest.fixture
def r53(aws_env: str) -> Iterator[tuple[Any, str]]:
    client = boto3.client("route53", endpoint_url=aws_env, region_name="us-east-1")
    zid = client.create_hosted_zone(Name="example.org.", CallerReference="t")["HostedZone"]["Id"]
    yield client, zid


def _r53_sets(client: Any, zid: str) -> dict[tuple[str, str], list[str]]:
    sets = client.list_resource_record_sets(HostedZoneId=zid)["ResourceRecordSets"]
    return {(s["Name"], s["Type"]): sorted(r["Value"] for r in s.get("ResourceRecords", []))
            for s in sets}


def test_route53_writes_and_removes_the_challenge_with_its_marker(
        r53: tuple[Any, str], aws_env: str, tmp_path: Path) -> None:
    client, zid = r53
    dns = _route53(tmp_path, aws_env)
    assert dns.write(NAME, ["tok-1", "tok-2"]) == TXT
    held = _r53_sets(client, zid)
    assert held[(TXT, "TXT")] == ['"tok-1"', '"tok-2"']
    assert held[(MARKER, "TXT")] == ['"provision owns TXT owner=certs"']
    assert dns.remove(NAME) is True
    held = _r53_sets(client, zid)
    assert (TXT, "TXT") not in held and (MARKER, "TXT") not in held
    assert dns.remove(NAME) is False  # nothing left: nothing to do


def test_route53_someone_elses_challenge_is_refused_and_kept(
        r53: tuple[Any, str], aws_env: str, tmp_path: Path) -> None:
    client, zid = r53
    client.change_resource_record_sets(HostedZoneId=zid, ChangeBatch={"Changes": [
        {"Action": "CREATE", "ResourceRecordSet": {
            "Name": TXT, "Type": "TXT", "TTL": 60, "ResourceRecords": [{"Value": '"theirs"'}]}},
        {"Action": "CREATE", "ResourceRecordSet": {
            "Name": "example.org.", "Type": "CAA", "TTL": 300,
            "ResourceRecords": [{"Value": '0 issue "digicert.com"'}]}}]})
    dns = _route53(tmp_path, aws_env)
    with pytest.raises(ChallengeError, match="no ownership marker of this inventory"):
        dns.write(NAME, ["tok"])
    with pytest.raises(ChallengeError):
        dns.remove(NAME)
    assert _r53_sets(client, zid)[(TXT, "TXT")] == ['"theirs"']
    apex, caa = dns.caa_records(NAME)
    assert apex == "example.org." and caa == {"example.org.": ('0 issue "digicert.com"',)}


PROJECT, MZ, ZONE = "lab-project", "example-org", "example.org."


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloudDns]:
    with isolated_fake(monkeypatch, PROJECT, MZ, ZONE) as f:
        yield f


def test_clouddns_writes_and_removes_the_challenge_with_its_marker(
        fake: FakeCloudDns, tmp_path: Path) -> None:
    inv = inventory_file(tmp_path, fake, PROJECT, MZ, {})
    doc = yaml.safe_load(inv.read_text())
    doc["dns"]["owner"] = "certs"
    inv.write_text(yaml.safe_dump(doc))
    dns = Dns01(load_inventory(inv))
    dns.write(NAME, ["tok"])
    sets = fake.rrsets(PROJECT, MZ)
    assert sets[(TXT, "TXT")]["rrdatas"] == ['"tok"']
    assert sets[(MARKER, "TXT")]["rrdatas"] == ['"provision owns TXT owner=certs"']
    dns.write(NAME, ["tok-again"])  # a second run's value replaces ours in one change
    assert fake.rrsets(PROJECT, MZ)[(TXT, "TXT")]["rrdatas"] == ['"tok-again"']
    assert dns.remove(NAME) is True
    sets = fake.rrsets(PROJECT, MZ)
    assert (TXT, "TXT") not in sets and (MARKER, "TXT") not in sets


def test_a_name_in_no_zone_is_a_clear_error(fake: FakeCloudDns, tmp_path: Path) -> None:
    dns = Dns01(load_inventory(inventory_file(tmp_path, fake, PROJECT, MZ, {})))
    with pytest.raises(ChallengeError, match="in no zone of the inventory"):
        dns.write("api.example.net", ["tok"])
