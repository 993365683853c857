"""The route53 provider against moto's server over real HTTP on 127.0.0.1, and a stubbed
client for what moto is lenient about (conflicting changes)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from provision.dns.provider import StaleRead
from provision.dns.providers.route53 import Route53Provider
from provision.dns.rrset import Alias, rrset
from provision.dns.zone_plan import ChangeSet, plan_zone

ZONE = "example.org."


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    saved = dict(os.environ)
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                      AWS_SESSION_TOKEN="testing", AWS_EC2_METADATA_DISABLED="true",
                      AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE="/dev/null",
                      AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def r53(moto_url: str) -> Iterator[Any]:
    import boto3
    import requests

    requests.post(f"{moto_url}/moto-api/reset", timeout=5)
    client = boto3.client("route53", endpoint_url=moto_url, region_name="us-east-1")
    client.create_hosted_zone(Name=ZONE, CallerReference="t")
    yield client


def _zone_id(client: Any) -> str:
    return str(client.list_hosted_zones_by_name(DNSName=ZONE)["HostedZones"][0]["Id"])


def _inventory(tmp_path: Path, moto_url: str, records: dict[str, Any]) -> Path:
    doc = {"version": 1, "aws": {"region": "us-east-1", "endpoint_url": moto_url},
           "dns": {"zones": {"example.org": {"provider": "route53", "records": records}}}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    return p


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_plan_apply_then_no_changes(r53: Any, moto_url: str, tmp_path: Path) -> None:
    inv = _inventory(tmp_path, moto_url, {
        "api": {"type": "A", "values": ["203.0.113.50", "203.0.113.51"], "ttl": 3600},
        "www": {"type": "CNAME", "value": "api.example.org"},
        "v6": {"type": "AAAA", "values": ["2001:db8::0:1"]}})
    r = _cli("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert r.exit_code == 3, r.output
    assert "+ api A 203.0.113.50, 203.0.113.51 (ttl 3600)" in r.output
    assert "Plan: 3 to add, 0 to change, 0 to destroy." in r.output
    r = _cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 0, r.output
    assert "applied 3 changes" in r.output
    r = _cli("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert r.exit_code == 0, r.output
    assert "No changes." in r.output
    sets = {(s["Name"], s["Type"]): s for s in
            r53.list_resource_record_sets(HostedZoneId=_zone_id(r53))["ResourceRecordSets"]}
    assert sets[("www.example.org.", "CNAME")]["ResourceRecords"] == [{"Value": "api.example.org."}]
    assert sets[("v6.example.org.", "AAAA")]["ResourceRecords"] == [{"Value": "2001:db8::1"}]
    assert ('_provision.api.example.org.', "TXT") in sets

    # change one value, drop a record provision created: one change and one delete
    inv = _inventory(tmp_path, moto_url, {
        "api": {"type": "A", "values": ["203.0.113.52"], "ttl": 60},
        "v6": {"type": "AAAA", "values": ["2001:db8::1"]}})
    # ttl 3600 in the zone is above cutover_above_ttl: a plain change only with --no-migrate
    r = _cli("dns", "apply", "-i", str(inv), "--yes", "--json", "--no-migrate")
    assert r.exit_code == 0, r.output
    sets = {(s["Name"], s["Type"]): s for s in
            r53.list_resource_record_sets(HostedZoneId=_zone_id(r53))["ResourceRecordSets"]}
    assert ("www.example.org.", "CNAME") not in sets
    assert ("_provision.www.example.org.", "TXT") not in sets
    assert sets[("api.example.org.", "A")]["TTL"] == 60


def test_records_provision_does_not_own_are_left_alone(r53: Any, moto_url: str, tmp_path: Path) -> None:
    r53.change_resource_record_sets(HostedZoneId=_zone_id(r53), ChangeBatch={"Changes": [
        {"Action": "CREATE", "ResourceRecordSet": {"Name": "mail.example.org.", "Type": "A", "TTL": 300,
                                                   "ResourceRecords": [{"Value": "192.0.2.25"}]}}]})
    inv = _inventory(tmp_path, moto_url, {})
    r = _cli("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert r.exit_code == 0, r.output


def test_listing_pages_through_more_than_one_page(r53: Any, moto_url: str) -> None:
    zid = _zone_id(r53)
    changes = [{"Action": "CREATE", "ResourceRecordSet": {
        "Name": f"h{i:03d}.example.org.", "Type": "A", "TTL": 300,
        "ResourceRecords": [{"Value": f"10.0.{i // 250}.{i % 250 + 1}"}]}} for i in range(250)]
    r53.change_resource_record_sets(HostedZoneId=zid, ChangeBatch={"Changes": changes})
    calls: list[dict[str, Any]] = []
    p = Route53Provider(ZONE, endpoint_url=r53.meta.endpoint_url, page_size=100)
    p.client.meta.events.register("provide-client-params.route53.ListResourceRecordSets",
                                  lambda params, **_: calls.append(dict(params)))
    got = p.list_rrsets()
    assert len([rr for rr in got if rr.type == "A"]) == 250
    assert {"SOA", "NS"} <= {rr.type for rr in got}
    assert len(calls) == 3  # 252 RRsets, 100 per page
    assert "StartRecordName" not in calls[0] and "StartRecordName" in calls[1]


def test_an_alias_has_no_ttl_and_is_never_given_one(r53: Any, moto_url: str, tmp_path: Path) -> None:
    zid = _zone_id(r53)
    r53.change_resource_record_sets(HostedZoneId=zid, ChangeBatch={"Changes": [
        {"Action": "CREATE", "ResourceRecordSet": {"Name": "target.example.org.", "Type": "A", "TTL": 300,
                                                   "ResourceRecords": [{"Value": "192.0.2.1"}]}},
        {"Action": "CREATE", "ResourceRecordSet": {"Name": "lb.example.org.", "Type": "A", "AliasTarget": {
            "HostedZoneId": zid.rsplit("/", 1)[-1], "DNSName": "target.example.org.",
            "EvaluateTargetHealth": False}}}]})
    p = Route53Provider(ZONE, endpoint_url=r53.meta.endpoint_url)
    lb = next(rr for rr in p.list_rrsets() if rr.name == "lb.example.org.")
    assert lb.ttl is None and lb.alias is not None and lb.alias.dns_name == "target.example.org."
    # an unmanaged alias: untouched
    assert _cli("dns", "plan", "-i", str(_inventory(tmp_path, moto_url, {})),
                "--detailed-exitcode").exit_code == 0
    # the DELETE of an alias carries its target and no TTL
    batch = p.change_batch(ChangeSet(deletions=(lb,)))
    sent = batch["Changes"][0]["ResourceRecordSet"]
    assert "TTL" not in sent and sent["AliasTarget"]["DNSName"] == "target.example.org."
    # managing the name with plain values replaces the alias, and the plan says so
    inv = _inventory(tmp_path, moto_url, {"lb": {"type": "A", "values": ["192.0.2.9"], "ttl": 120}})
    r = _cli("dns", "plan", "-i", str(inv))
    assert "alias" in r.output and "no TTL of its own" in r.output, r.output
    r = _cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 0, r.output
    lb2 = next(rr for rr in p.list_rrsets() if rr.name == "lb.example.org.")
    assert lb2.alias is None and lb2.ttl == 120 and lb2.values == ("192.0.2.9",)


# --- conflicts: moto accepts them, AWS does not; a stubbed client answers like AWS -------

def _stubbed(code: str, message: str) -> tuple[Route53Provider, Any]:
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("route53", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x", endpoint_url="http://127.0.0.1:9")
    stub = Stubber(client)
    stub.add_client_error("change_resource_record_sets", service_error_code=code,
                          service_message=message, http_status_code=400)
    stub.activate()
    return Route53Provider(ZONE, hosted_zone_id="Z123", client=client), stub


def test_a_stale_delete_is_refused_clearly() -> None:
    p, stub = _stubbed("InvalidChangeBatch", "[Tried to delete resource record set "
                       "[name='api.example.org.', type='A'] but it was not found]")
    old = rrset("api.example.org.", "A", 300, ["192.0.2.1"])
    new = rrset("api.example.org.", "A", 300, ["192.0.2.2"])
    with pytest.raises(StaleRead, match="changed since it was read"):
        p.apply(ChangeSet((old,), (new,)))
    stub.assert_no_pending_responses()


def test_creating_what_already_exists_is_refused_clearly() -> None:
    p, _ = _stubbed("InvalidChangeBatch", "[Tried to create resource record set "
                    "[name='api.example.org.', type='A'] but it already exists]")
    with pytest.raises(StaleRead, match="nothing was applied"):
        p.apply(ChangeSet((), (rrset("api.example.org.", "A", 300, ["192.0.2.2"]),)))


def test_other_api_errors_are_one_line() -> None:
    from provision.dns.provider import ProviderError

    p, _ = _stubbed("AccessDenied", "User is not authorized to perform route53:ChangeResourceRecordSets")
    with pytest.raises(ProviderError, match="AccessDenied") as e:
        p.apply(ChangeSet((), (rrset("api.example.org.", "A", 300, ["192.0.2.2"]),)))
    assert not isinstance(e.value, StaleRead) and "\n" not in e.value.message


def test_cname_beside_an_alias_is_refused() -> None:
    lb = rrset("lb.example.org.", "A", None, [], Alias("t.example.org.", "Z1"))
    plan = plan_zone(ZONE, [rrset("lb.example.org.", "CNAME", 300, ["x.example.net."])], [lb])
    assert plan.refused and "must be alone" in plan.errors[0]


def test_one_rrset_and_the_nameservers(r53: Any, moto_url: str) -> None:
    zid = _zone_id(r53)
    r53.change_resource_record_sets(HostedZoneId=zid, ChangeBatch={"Changes": [
        {"Action": "CREATE", "ResourceRecordSet": {"Name": "one.example.org.", "Type": "A", "TTL": 42,
                                                   "ResourceRecords": [{"Value": "192.0.2.42"}]}}]})
    p = Route53Provider(ZONE, endpoint_url=moto_url)
    assert p.get_rrset("one.example.org.", "A") == rrset("one.example.org.", "A", 42, ["192.0.2.42"])
    assert p.get_rrset("two.example.org.", "A") is None
    assert len(p.nameservers()) == 4 and all(n.endswith(".") and a is None for n, a in p.nameservers())
