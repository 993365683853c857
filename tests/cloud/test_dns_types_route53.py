"""TXT, MX, SRV and CAA records through Route53's API on moto (real HTTP on 127.0.0.1):
apply, then a plan that shows no changes; Route53's own spellings (names without their
final dot, case kept, octal escapes in TXT) plan nothing; an answer provision cannot parse
refuses the plan. The cases are tests/support/record_types.py's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from tests.support.record_types import canonical, cli, expected, records, round_trip


@pytest.fixture
def r53(aws_env: str) -> Iterator[Any]:
    moto_url = aws_env
    client = boto3.client("route53", endpoint_url=moto_url, region_name="us-east-1")
    zid = client.create_hosted_zone(Name="example.org.", CallerReference="t")["HostedZone"]["Id"]
    yield client, zid


def _r53_inventory(tmp_path: Path, url: str, records: dict[str, Any]) -> Path:
    doc = {"version": 1, "aws": {"region": "us-east-1", "endpoint_url": url},
           "dns": {"zones": {"example.org": {"provider": "route53", "records": records}}}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    return p


def _r53_sets(client: Any, zid: str) -> dict[tuple[str, str], list[str]]:
    sets = client.list_resource_record_sets(HostedZoneId=zid)["ResourceRecordSets"]
    return {(s["Name"], s["Type"]): sorted(r["Value"] for r in s.get("ResourceRecords", []))
            for s in sets}


def test_route53_round_trip_of_txt_mx_srv_caa(r53: Any, aws_env: str, tmp_path: Path) -> None:
    client, zid = r53
    round_trip(_r53_inventory(tmp_path, aws_env, records("example.org")))
    held = _r53_sets(client, zid)
    for key, values in expected("example.org").items():
        assert canonical(key[1], held[key]) == values, key
    assert held[("_provision.example.org.", "TXT")] == [
        '"provision owns CAA owner=inv"', '"provision owns MX owner=inv"', '"provision owns TXT owner=inv"']


def test_route53_a_record_in_another_spelling_is_no_change(r53: Any, aws_env: str,
                                                           tmp_path: Path) -> None:
    """Route53 takes names without their final dot, keeps case, and spells bytes in TXT
    as octal escapes (\\101 is 'A'): the inventory's canonical form of the same data
    plans nothing."""
    client, zid = r53
    client.change_resource_record_sets(HostedZoneId=zid, ChangeBatch={"Changes": [
        {"Action": "CREATE", "ResourceRecordSet": {
            "Name": "example.org.", "Type": "MX", "TTL": 300,
            "ResourceRecords": [{"Value": "10 MX1.Example.ORG"}]}},
        {"Action": "CREATE", "ResourceRecordSet": {
            "Name": "txt.example.org.", "Type": "TXT", "TTL": 300,
            "ResourceRecords": [{"Value": '"a \\"quoted\\" \\101"'}]}}]})
    inv = _r53_inventory(tmp_path, aws_env, {
        "@": {"type": "MX", "values": ["10 mx1.example.org."]},
        "txt": {"type": "TXT", "values": ['a "quoted" A']}})
    r = cli("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert r.exit_code == 0, r.output


def test_route53_an_unparseable_answer_refuses_the_plan(r53: Any, aws_env: str,
                                                        tmp_path: Path) -> None:
    client, zid = r53
    client.change_resource_record_sets(HostedZoneId=zid, ChangeBatch={"Changes": [
        {"Action": "CREATE", "ResourceRecordSet": {
            "Name": "example.org.", "Type": "MX", "TTL": 300,
            "ResourceRecords": [{"Value": "ten mx1.example.org"}]}}]})
    inv = _r53_inventory(tmp_path, aws_env, {"@": {"type": "MX", "values": ["10 mx1.example.org"]}})
    r = cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 1, r.output
    out = " ".join(r.output.split())
    assert "@ MX: the provider's answer is refused" in out and "not an MX value" in out, out
    assert _r53_sets(client, zid)[("example.org.", "MX")] == ["ten mx1.example.org"]




def test_route53_a_label_holding_an_escaped_dot_is_not_the_two_label_name(
        r53: Any, aws_env: str, tmp_path: Path) -> None:
    """`a\\056b` (one label 'a.b') beside a.b.example.org.: read as a.b, the two shared
    one key and the listing kept whichever came last, so an import could declare the
    other record's value for a.b. Each is its own name; the spoof is only a comment."""
    client, zid = r53
    client.change_resource_record_sets(HostedZoneId=zid, ChangeBatch={"Changes": [
        {"Action": "CREATE", "ResourceRecordSet": {
            "Name": name, "Type": "A", "TTL": 300, "ResourceRecords": [{"Value": value}]}}
        for name, value in (("a.b.example.org.", "192.0.2.1"),
                            ("a\\056b.example.org.", "203.0.113.66"),
                            ("c\\056d.example.org.", "203.0.113.67"))]})
    inv = _r53_inventory(tmp_path, aws_env, {})
    out = tmp_path / "adopted.yml"
    r = cli("import", "dns", "-i", str(inv), "--zone", "example.org", "-o", str(out))
    assert r.exit_code == 0, r.output
    doc = yaml.safe_load(out.read_text())
    records = doc["dns"]["zones"]["example.org"]["records"]
    assert records == {"a.b": {"type": "A", "values": ["192.0.2.1"], "ttl": 300}}
    assert "c.d" not in out.read_text() and "203.0.113.67" in out.read_text()  # a comment
    doc["aws"] = {"region": "us-east-1", "endpoint_url": aws_env}
    out.write_text(yaml.safe_dump(doc))
    r = cli("dns", "plan", "-i", str(out), "--detailed-exitcode")
    assert r.exit_code == 0, r.output


def test_route53_an_import_lists_routing_policy_records_as_comments(
        r53: Any, aws_env: str, tmp_path: Path) -> None:
    """Weighted records (SetIdentifier) are left out of the listing provision plans
    with: an import said nothing of them, neither imported nor a comment."""
    client, zid = r53
    client.change_resource_record_sets(HostedZoneId=zid, ChangeBatch={"Changes": [
        {"Action": "CREATE", "ResourceRecordSet": {
            "Name": "w.example.org.", "Type": "A", "TTL": 60, "SetIdentifier": ident,
            "Weight": 50, "ResourceRecords": [{"Value": value}]}}
        for ident, value in (("blue", "192.0.2.10"), ("green", "192.0.2.11"))]})
    out = tmp_path / "adopted.yml"
    r = cli("import", "dns", "-i", str(_r53_inventory(tmp_path, aws_env, {})),
            "--zone", "example.org", "-o", str(out))
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert yaml.safe_load(text)["dns"]["zones"]["example.org"]["records"] == {}
    for ident in ("blue", "green"):
        assert f"#   w.example.org. A ({ident})  (a routing-policy record" in text, text
    assert "(4 listed as comments)" in r.output   # with the apex NS and SOA
