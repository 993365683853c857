"""`provision import dns` round trip on real provider APIs on 127.0.0.1: Cloud DNS (the
real google client against the local v1 fake), Route53 (moto over HTTP), PowerDNS (a real
pdns_server). Import a zone, adopt the YAML, and `dns plan --detailed-exitcode` says no
changes (exit 0). The zone holds hostile TXT data: the YAML written is printable ASCII,
its comments cannot write YAML, and nothing is sent to the zone. Adopting is not owning:
no marker is written until an apply changes a record, and that change marks only it.
(BIND through RFC 2136/AXFR: tests/lab/test_dns.py.)"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from tests.support.clouddns_fake import FakeCloudDns, isolated_fake
from tests.support.moto_server import aws_test_env, moto_server, reset
from tests.support.powerdns_server import pdns_server

PROJECT, MZ, ZONE = "lab-project", "example-org", "example.org."
# a TXT value that would be YAML if a comment line ended early
INJECTION = 'x\ndns: {zones: {}}\r\u2028records: {evil: {type: A, values: [127.0.0.66]}}\x1b[2J'
# what the zone holds (name, type, ttl, values) besides the apex SOA/NS
SEED: list[tuple[str, str, int, list[str]]] = [
    ("api.example.org.", "A", 300, ["127.0.0.10", "127.0.0.11"]),
    ("v6.example.org.", "AAAA", 120, ["::1"]),
    ("both.example.org.", "A", 60, ["127.0.0.12"]),
    ("both.example.org.", "AAAA", 60, ["::2"]),
    ("www.example.org.", "CNAME", 300, ["api.example.org."]),
    ("example.org.", "A", 3600, ["127.0.0.13"]),
    ("*.wild.example.org.", "A", 300, ["127.0.0.14"]),
    ("note.example.org.", "TXT", 300, ['"' + INJECTION.replace("\n", "\\010")
                                       .replace("\r", "\\013").replace("\x1b", "\\027") + '"']),
    ("mail.example.org.", "MX", 300, ["10 api.example.org."]),
    ("spf.example.org.", "TXT", 300, ['"v=spf1 -all"']),
    # a record provision wrote before owner ids (its marker without one): imported
    ("old.example.org.", "A", 300, ["127.0.0.15"]),
    ("_provision.old.example.org.", "TXT", 300, ['"provision owns A"']),
    # another inventory's record: left to its owner
    ("team.example.org.", "A", 300, ["127.0.0.16"]),
    ("_provision.team.example.org.", "TXT", 300, ['"provision owns A owner=vision"']),
]
IMPORTED = frozenset({"api", "v6", "both", "www", "@", "*.wild", "old", "mail", "spf"})


def _cli(*args: str, env: dict[str, str | None] | None = None) -> Any:
    return CliRunner().invoke(main, list(args), env=env)


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


def _round_trip(tmp_path: Path, doc: dict[str, Any], zone_key: str,
                env: dict[str, str | None] | None = None,
                expect: frozenset[str] = IMPORTED) -> tuple[bytes, dict[str, Any], Path]:
    """Import the zone of inventory `doc`, adopt the records, plan: no changes."""
    inv = _write(tmp_path / "inv.yml", doc)
    out = tmp_path / "imported.yml"
    r = _cli("import", "dns", "-i", str(inv), "--zone", zone_key, "-o", str(out), env=env)
    assert r.exit_code == 0, r.output
    raw = out.read_bytes()
    # printable ASCII and newlines only: no raw control, bidi or line-separator character
    assert all(b == 0x0A or 0x20 <= b < 0x7F for b in raw), raw
    imported = yaml.safe_load(raw)
    assert list(imported) == ["version", "dns"]
    zone = imported["dns"]["zones"][zone_key]
    assert set(zone["records"]) == expect
    assert "evil" not in zone["records"] and zone["provider"] == doc["dns"]["zones"][zone_key][
        "provider"]
    # the hostile TXT is listed, escaped, on comment lines only
    notes = [line for line in raw.decode().splitlines() if "note" in line]
    assert notes and all(line.startswith("#   note TXT") for line in notes), notes
    assert b"dns: {zones: {}}" in raw
    adopted = {**doc, "dns": {**doc["dns"], "zones": {zone_key: {
        **doc["dns"]["zones"][zone_key], "records": zone["records"]}}}}
    path = _write(tmp_path / "adopted.yml", adopted)
    r = _cli("dns", "plan", "-i", str(path), "--detailed-exitcode", env=env)
    assert r.exit_code == 0, r.output
    assert "no changes" in r.output
    return raw, adopted, path


# --- Cloud DNS --------------------------------------------------------------------------

@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloudDns]:
    with isolated_fake(monkeypatch, PROJECT, MZ, ZONE, page_size=5, pending_polls=0) as f:
        for name, rtype, ttl, values in SEED:
            f.set_rrset(PROJECT, MZ, name, rtype, ttl, values)
        yield f


def _clouddns(fake: FakeCloudDns) -> dict[str, Any]:
    return {"version": 1, "dns": {"owner": "ml-team", "zones": {"example.org": {
        "provider": "clouddns", "project": PROJECT, "managed_zone": MZ, "endpoint": fake.url,
        "records": {}}}}}


def test_clouddns_import_then_plan_shows_no_changes(fake: FakeCloudDns, tmp_path: Path) -> None:
    before = {k: dict(v) for k, v in fake.rrsets(PROJECT, MZ).items()}
    raw, adopted, path = _round_trip(tmp_path, _clouddns(fake), "example.org")
    assert not [p for m, p in fake.requests if m == "POST"], "import or plan sent a change"
    assert fake.rrsets(PROJECT, MZ) == before
    assert b"team A" in raw and b"owner 'vision' manages this name" in raw
    assert b"\\226\\128\\168records" in raw    # U+2028 (YAML would end a comment there), as DDD escapes
    assert b"_provision" not in raw.split(b"\ndns:")[1]   # no marker in the YAML itself

    # adopting is not owning: a record left out is not deleted (no marker of ours) ...
    records = adopted["dns"]["zones"]["example.org"]["records"]
    del records["v6"]
    # ... and the first change marks what it changes, and only that, with our owner id
    records["api"]["values"] = ["127.0.0.20"]
    _write(path, adopted)
    r = _cli("dns", "apply", "-i", str(path), "--yes")
    assert r.exit_code == 0, r.output
    sets = fake.rrsets(PROJECT, MZ)
    assert sets[("v6.example.org.", "AAAA")]["rrdatas"] == ["::1"]
    assert sets[("_provision.api.example.org.", "TXT")]["rrdatas"] == [
        '"provision owns A owner=ml-team"']
    markers = sorted(n for n, t in sets if n.startswith("_provision."))
    assert markers == ["_provision.api.example.org.", "_provision.old.example.org.",
                       "_provision.team.example.org."]
    r = _cli("dns", "plan", "-i", str(path), "--detailed-exitcode")
    assert r.exit_code == 0, r.output


def test_import_needs_the_zone_or_a_provider_that_needs_no_settings(
        fake: FakeCloudDns, tmp_path: Path) -> None:
    inv = _write(tmp_path / "inv.yml", _clouddns(fake))
    r = _cli("import", "dns", "-i", str(inv), "--zone", "other.org")
    assert r.exit_code == 2 and "zone other.org is not in the inventory" in r.output
    r = _cli("import", "dns", "-i", str(inv), "--zone", "other.org", "--provider", "rfc2136")
    assert r.exit_code == 2 and "--provider rfc2136 needs server" in r.output
    r = _cli("import", "dns", "-i", str(inv), "--zone", "example.org", "--provider", "route53")
    assert r.exit_code == 2 and "with provider clouddns" in r.output
    r = _cli("import", "dns", "-i", str(inv), "--zone", "bad\x1bzone")
    assert r.exit_code == 2 and "\x1b" not in r.output
    assert not [p for m, p in fake.requests if m == "POST"]


# --- Route53 (moto over HTTP) -----------------------------------------------------------

def test_route53_import_then_plan_shows_no_changes(tmp_path: Path) -> None:
    import boto3

    with moto_server() as url:
        env = aws_test_env(url)
        saved = dict(os.environ)
        os.environ.update({k: v for k, v in env.items() if v is not None})
        try:
            reset(url)
            client = boto3.client("route53", endpoint_url=url, region_name="us-east-1")
            zid = client.create_hosted_zone(Name=ZONE, CallerReference="import")["HostedZone"]["Id"]
            client.change_resource_record_sets(HostedZoneId=zid, ChangeBatch={"Changes": [
                {"Action": "CREATE", "ResourceRecordSet": {
                    "Name": name, "Type": rtype, "TTL": ttl,
                    "ResourceRecords": [{"Value": v} for v in values]}}
                for name, rtype, ttl, values in SEED]})
            before = client.list_resource_record_sets(HostedZoneId=zid)["ResourceRecordSets"]
            doc = {"version": 1, "aws": {"region": "us-east-1", "endpoint_url": url},
                   "dns": {"zones": {"example.org": {"provider": "route53", "records": {}}}}}
            _round_trip(tmp_path, doc, "example.org", env=env)
            # --provider route53 without the zone in the inventory (the hosted zone by name)
            bare = _write(tmp_path / "bare.yml", {**doc, "dns": {"zones": {}}})
            r = _cli("import", "dns", "-i", str(bare), "--zone", "example.org", "--provider",
                     "route53", env=env)
            assert r.exit_code == 0, r.output
            assert set(yaml.safe_load(r.stdout)["dns"]["zones"]["example.org"]["records"]) \
                == IMPORTED
            after = client.list_resource_record_sets(HostedZoneId=zid)["ResourceRecordSets"]
            assert after == before
        finally:
            os.environ.clear()
            os.environ.update(saved)


# --- PowerDNS (a real pdns_server) ------------------------------------------------------

def test_powerdns_import_then_plan_shows_no_changes(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with pdns_server(tmp_path / "pdns") as pdns:
        # the key file in the inventory's directory, named for the server (the import's
        # round-trip check reads the YAML as if beside the inventory: its key file is there)
        key = tmp_path / f"127.0.0.1_{pdns.url.rsplit(':', 1)[1].rstrip('/')}.key"
        key.write_text(pdns.key + "\n")
        pdns.create_zone(ZONE)
        for name, rtype, ttl, values in SEED:  # PowerDNS keeps TXT data in presentation form
            pdns.set_rrset(ZONE, name, rtype, ttl, [v.replace("\u2028", "\\226\\128\\168")
                                                    for v in values])
        before = pdns.rrsets(ZONE)
        doc = {"version": 1, "dns": {"zones": {"example.org": {
            "provider": "powerdns", "api_url": pdns.url, "api_key_file": key.name,
            "dns_address": "127.0.0.1", "dns_port": pdns.dns_port, "records": {}}}}}
        # the server's own name server address (its test zones have one) is a record too
        _round_trip(tmp_path, doc, "example.org", expect=IMPORTED | {"ns1"})
        assert pdns.rrsets(ZONE) == before
