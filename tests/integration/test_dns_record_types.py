"""TXT, MX, SRV and CAA records through each provider's real API: apply, then a plan that
shows no changes (no perpetual diff), and the data read back as the server holds it.
Route53 on moto over HTTP, Cloud DNS through the real google client against the local
v1 fake, PowerDNS against the real pdns_server (asked over DNS too). RFC 2136 (BIND) is in
tests/lab/test_dns.py. Everything listens on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from tests.support.clouddns_fake import FakeCloudDns, inventory_file, isolated_fake
from tests.support.moto_server import aws_test_env, moto_server, reset
from tests.support.powerdns_server import Pdns, pdns_server

DKIM = "v=DKIM1; k=rsa; p=" + "A" * 300        # longer than one 255-octet string


def _records(zone: str) -> dict[str, Any]:
    z = zone.rstrip(".")
    return {
        "@": [{"type": "CAA", "values": ['0 issue "letsencrypt.org"',
                                         f'0 iodef "mailto:security@{z}"',
                                         '128 issuewild ";"']},
              {"type": "MX", "values": [f"10 mx1.{z}", f"20 MX2.{z}."], "ttl": 3600},
              {"type": "TXT", "values": ["v=spf1 mx -all", '"first" "second"']}],
        "sel._domainkey": {"type": "TXT", "values": [DKIM], "ttl": 600},
        "_sip._tcp": {"type": "SRV", "values": [f"10 60 5060 sip.{z}", f"20 0 5060 sip2.{z}"]},
        "mx1": {"type": "A", "values": ["127.0.0.25"]},
    }


# what every provider must end up holding (our canonical form, after the provider's own)
def _expected(zone: str) -> dict[tuple[str, str], list[str]]:
    z = zone.rstrip(".") + "."
    half = "v=DKIM1; k=rsa; p=" + "A" * (255 - len("v=DKIM1; k=rsa; p="))
    return {
        (z, "CAA"): sorted(['0 issue "letsencrypt.org"', f'0 iodef "mailto:security@{z[:-1]}"',
                            '128 issuewild ";"']),
        (z, "MX"): [f"10 mx1.{z}", f"20 mx2.{z}"],
        (z, "TXT"): sorted(['"v=spf1 mx -all"', '"first" "second"']),
        (f"sel._domainkey.{z}", "TXT"): [f'"{half}" "{"A" * (len(DKIM) - 255)}"'],
        (f"_sip._tcp.{z}", "SRV"): [f"10 60 5060 sip.{z}", f"20 0 5060 sip2.{z}"],
    }


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _round_trip(inv: Path) -> dict[str, Any]:
    r = _cli("dns", "plan", "-i", str(inv), "--detailed-exitcode", "--json")
    assert r.exit_code == 3, r.output
    plan = json.loads(r.stdout)
    assert plan["summary"] == {"add": 6, "change": 0, "destroy": 0}, plan
    r = _cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 0, r.output
    r = _cli("dns", "plan", "-i", str(inv), "--detailed-exitcode", "--json")
    assert r.exit_code == 0, r.output   # no perpetual diff: what the provider returns is ours
    return dict(json.loads(r.stdout))


def _canonical(rtype: str, values: list[str]) -> list[str]:
    from provision.dns.records import normalise_value

    return sorted(normalise_value(rtype, v) for v in values)


# --- Route53 (moto over HTTP) -------------------------------------------------------------

@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def r53(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    import boto3

    for k, v in aws_test_env(moto_url).items():
        if v is None:
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, v)
    reset(moto_url)
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


def test_route53_round_trip_of_txt_mx_srv_caa(r53: Any, moto_url: str, tmp_path: Path) -> None:
    client, zid = r53
    _round_trip(_r53_inventory(tmp_path, moto_url, _records("example.org")))
    held = _r53_sets(client, zid)
    for key, values in _expected("example.org").items():
        assert _canonical(key[1], held[key]) == values, key
    assert held[("_provision.example.org.", "TXT")] == [
        '"provision owns CAA"', '"provision owns MX"', '"provision owns TXT"']


def test_route53_a_record_in_another_spelling_is_no_change(r53: Any, moto_url: str,
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
    inv = _r53_inventory(tmp_path, moto_url, {
        "@": {"type": "MX", "values": ["10 mx1.example.org."]},
        "txt": {"type": "TXT", "values": ['a "quoted" A']}})
    r = _cli("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert r.exit_code == 0, r.output


def test_route53_an_unparseable_answer_refuses_the_plan(r53: Any, moto_url: str,
                                                        tmp_path: Path) -> None:
    client, zid = r53
    client.change_resource_record_sets(HostedZoneId=zid, ChangeBatch={"Changes": [
        {"Action": "CREATE", "ResourceRecordSet": {
            "Name": "example.org.", "Type": "MX", "TTL": 300,
            "ResourceRecords": [{"Value": "ten mx1.example.org"}]}}]})
    inv = _r53_inventory(tmp_path, moto_url, {"@": {"type": "MX", "values": ["10 mx1.example.org"]}})
    r = _cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 1, r.output
    out = " ".join(r.output.split())
    assert "@ MX: the provider's answer is refused" in out and "not an MX value" in out, out
    assert _r53_sets(client, zid)[("example.org.", "MX")] == ["ten mx1.example.org"]


# --- Cloud DNS (the real client against the local v1 fake) ---------------------------------

PROJECT, MZ = "lab-project", "example-org"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloudDns]:
    with isolated_fake(monkeypatch, PROJECT, MZ, "example.org.", pending_polls=1) as f:
        yield f


def test_clouddns_round_trip_of_txt_mx_srv_caa(fake: FakeCloudDns, tmp_path: Path) -> None:
    _round_trip(inventory_file(tmp_path, fake, PROJECT, MZ, _records("example.org")))
    held = {k: sorted(v["rrdatas"]) for k, v in fake.rrsets(PROJECT, MZ).items()}
    for key, values in _expected("example.org").items():
        assert _canonical(key[1], held[key]) == values, key
    # what was sent is what the API takes: host names absolute (it refuses them otherwise)
    adds = [a for b in fake.bodies for a in b.get("additions", [])]
    assert all(v.split()[-1].endswith(".") for a in adds if a["type"] in ("MX", "SRV")
               for v in a["rrdatas"])


def test_clouddns_a_record_in_another_spelling_is_no_change(fake: FakeCloudDns,
                                                            tmp_path: Path) -> None:
    fake.set_rrset(PROJECT, MZ, "example.org.", "MX", 300, ["10 MX1.EXAMPLE.ORG."])
    fake.set_rrset(PROJECT, MZ, "example.org.", "CAA", 300, ["0 ISSUE letsencrypt.org"])
    inv = inventory_file(tmp_path, fake, PROJECT, MZ, {"@": [
        {"type": "MX", "values": ["10 mx1.example.org"]},
        {"type": "CAA", "values": ['0 issue "letsencrypt.org"']}]})
    r = _cli("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert r.exit_code == 0, r.output
    # and a change deletes the record as read, which the API matches by its data
    inv = inventory_file(tmp_path, fake, PROJECT, MZ, {"@": [
        {"type": "MX", "values": ["20 mx1.example.org"]},
        {"type": "CAA", "values": ['0 issue "letsencrypt.org"']}]})
    r = _cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 0, r.output
    assert fake.rrsets(PROJECT, MZ)[("example.org.", "MX")]["rrdatas"] == ["20 mx1.example.org."]


# --- PowerDNS (the real server) ------------------------------------------------------------

KEY_ENV = "PROVISION_TEST_PDNS_KEY"


@pytest.fixture(scope="module")
def pdns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pdns]:
    with pdns_server(tmp_path_factory.mktemp("pdns")) as p:
        yield p


def test_powerdns_round_trip_of_txt_mx_srv_caa(pdns: Pdns, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, pdns.key)
    zone = "types.example.org."
    pdns.create_zone(zone)
    try:
        doc = {"version": 1, "dns": {"zones": {zone.rstrip("."): {
            "provider": "powerdns", "api_url": pdns.url, "api_key_env": KEY_ENV,
            "dns_address": "127.0.0.1", "dns_port": pdns.dns_port,
            "records": _records(zone)}}}}
        inv = tmp_path / "inv.yml"
        inv.write_text(yaml.safe_dump(doc))
        _round_trip(inv)
        held = pdns.rrsets(zone)
        for key, values in _expected(zone).items():
            assert _canonical(key[1], held[key][1]) == values, key
            # the effect: the server answers the data itself, authoritatively
            rcode, answer, aa, _ = pdns.query(key[0], key[1])
            assert (rcode, aa) == ("NOERROR", True) and _canonical(key[1], answer) == values, key
    finally:
        pdns.delete_zone(zone)
