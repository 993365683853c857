"""TXT, MX, SRV and CAA records through each provider's real API: apply, then a plan that
shows no changes (no perpetual diff), and the data read back as the server holds it.
Cloud DNS through the real google client against the local v1 fake, PowerDNS against the
real pdns_server (asked over DNS too). Route53 (moto) is in
tests/cloud/test_dns_types_route53.py, RFC 2136 (BIND) in tests/lab/test_dns.py. The
cases are tests/support/record_types.py's. Everything listens on
127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.clouddns_fake import FakeCloudDns, inventory_file, isolated_fake
from tests.support.powerdns_server import KEY_ENV, Pdns
from tests.support.record_types import canonical, cli, expected, records, round_trip

# --- Cloud DNS (the real client against the local v1 fake) ---------------------------------

PROJECT, MZ = "lab-project", "example-org"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloudDns]:
    with isolated_fake(monkeypatch, PROJECT, MZ, "example.org.", pending_polls=1) as f:
        yield f


def test_clouddns_round_trip_of_txt_mx_srv_caa(fake: FakeCloudDns, tmp_path: Path) -> None:
    round_trip(inventory_file(tmp_path, fake, PROJECT, MZ, records("example.org")))
    held = {k: sorted(v["rrdatas"]) for k, v in fake.rrsets(PROJECT, MZ).items()}
    for key, values in expected("example.org").items():
        assert canonical(key[1], held[key]) == values, key
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
    r = cli("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert r.exit_code == 0, r.output
    # and a change deletes the record as read, which the API matches by its data
    inv = inventory_file(tmp_path, fake, PROJECT, MZ, {"@": [
        {"type": "MX", "values": ["20 mx1.example.org"]},
        {"type": "CAA", "values": ['0 issue "letsencrypt.org"']}]})
    r = cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 0, r.output
    assert fake.rrsets(PROJECT, MZ)[("example.org.", "MX")]["rrdatas"] == ["20 mx1.example.org."]


# --- PowerDNS (the real server) ------------------------------------------------------------



def test_powerdns_round_trip_of_txt_mx_srv_caa(pdns: Pdns, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, pdns.key)
    monkeypatch.setenv("PROVISION_POWERDNS_API_URL", pdns.url)  # the server the key is for
    zone = "types.example.org."
    pdns.create_zone(zone)
    try:
        doc = {"version": 1, "dns": {"zones": {zone.rstrip("."): {
            "provider": "powerdns", "api_url": pdns.url,
            "dns_address": "127.0.0.1", "dns_port": pdns.dns_port,
            "records": records(zone)}}}}
        inv = tmp_path / "inv.yml"
        inv.write_text(yaml.safe_dump(doc))
        round_trip(inv)
        held = pdns.rrsets(zone)
        for key, values in expected(zone).items():
            assert canonical(key[1], held[key][1]) == values, key
            # the effect: the server answers the data itself, authoritatively
            rcode, answer, aa, _ = pdns.query(key[0], key[1])
            assert (rcode, aa) == ("NOERROR", True) and canonical(key[1], answer) == values, key
        # `dns check` asks the server for each type it writes: SRV (the type declared at
        # the name, by default) and CAA (asked for) agree with the inventory
        for name, args, rtype in ((f"_sip._tcp.{zone}", (), "SRV"),
                                  (zone, ("--type", "caa"), "CAA")):
            r = cli("dns", "check", name, "-i", str(inv), *args, "--json")
            out = json.loads(r.stdout)
            assert r.exit_code == 0 and out["type"] == rtype, r.output
            assert [a["values"] for a in out["answers"]] == [expected(zone)[(name, rtype)]]
    finally:
        pdns.delete_zone(zone)
