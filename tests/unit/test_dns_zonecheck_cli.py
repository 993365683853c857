"""What `dns check --zone` prints for people (only what differs, the findings, one
summary line; servers' text escaped), and its bad input (exit 2, before any query)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from provision.commands.dns_zonecheck import check_json, print_check
from provision.dns.propagation import Answer, Target
from provision.dns.rrset import rrset
from provision.dns.zonecheck import judge, questions
from provision.dns.zonequery import ZoneCheck

NS1 = Target("ns1.example.org.", "192.0.2.1", "authoritative")
NS2 = Target("ns2.example.org.", "192.0.2.2", "authoritative")
RES = Target("192.0.2.53", "192.0.2.53", "resolver")


def _check() -> ZoneCheck:
    recs = [rrset(f"r{i}.example.org.", "A", 3600 if i == 2 else 300, [f"192.0.2.{10 + i}"])
            for i in range(5)]
    targets = [NS1, NS2, RES]
    answers = {}
    for t, name, rtype in questions(recs, targets):
        rr = next((r for r in recs if r.name == name), None)
        answers[(t, name, rtype)] = (Answer(t, "NXDOMAIN", True) if rr is None or rtype == "TXT"
                                     else Answer(t, "NOERROR", t.role == "authoritative",
                                                 rr.values, 60 if rr.ttl == 3600 else rr.ttl))
    # ns2 serves r3 with a value holding an escape sequence (hostile text from a server)
    answers[(NS2, "r3.example.org.", "A")] = Answer(NS2, "NOERROR", True, ("\x1b[2J192.0.2.99",), 300)
    report = judge("example.org", recs, targets, answers, 1_800_000_000.0)
    return ZoneCheck(report, len(answers), 0.5)


def test_people_see_only_the_record_that_differs_the_low_ttl_and_a_summary(
        capsys: pytest.CaptureFixture[str]) -> None:
    print_check(_check())
    out = capsys.readouterr().out
    assert "r3 A" in out and "ns2.example.org." in out
    assert "r2 A" in out and "low ttl" in out and "60 / 3600" in out
    assert not [n for n in ("r0 A", "r1 A", "r4 A") if n in out], out
    assert "\x1b" not in out and "\\x1b[2J192.0.2.99" in out
    assert "1 of 5 record(s) differ on ns2.example.org.; 1 TTL/migration finding(s)" in out
    assert "5 record(s) asked of 2 authoritative server(s) and 1 resolver(s): 25 queries in 0.50 s, 50/s" in out


def test_json_has_every_record_and_who_answers_what_where_they_differ() -> None:
    data = check_json(_check())
    assert data["ok"] is False and data["disagree"] == ["ns2.example.org."]
    assert len(data["records"]) == 5  # type: ignore[arg-type]
    r3 = next(r for r in data["records"] if r["name"] == "r3.example.org.")  # type: ignore[attr-defined]
    assert set(r3["answers"]) == {"ns1.example.org.", "ns2.example.org.", "192.0.2.53"}
    assert r3["answers"]["ns2.example.org."]["values"] == ["\x1b[2J192.0.2.99"]
    assert r3["disagree"] == ["ns2.example.org."]
    assert [r for r in data["records"] if "answers" in r] == [r3]  # type: ignore[attr-defined]
    assert [f["kind"] for f in data["findings"]] == ["low_ttl"]  # type: ignore[attr-defined]


def _inventory(tmp_path: Path, dns: bool = True) -> Path:
    key = tmp_path / "k.key"
    key.write_text('key "k" {\n\talgorithm hmac-sha256;\n\tsecret "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=";\n};\n')
    doc: dict[str, object] = {"version": 1, "hosts": {}}
    if dns:
        doc["dns"] = {"resolvers": ["127.0.0.1"], "zones": {"example.org": {
            "provider": "rfc2136", "server": "127.0.0.1", "tsig_key_file": str(key),
            "records": {"app": {"type": "A", "values": ["192.0.2.1"]}}}}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    return p


@pytest.mark.parametrize("args, message", [
    (["--zone", "nosuch.example"], "unknown zone 'nosuch.example'"),
    (["--zone", "example.org", "--in-flight", "0"], "--in-flight"),
])
def test_bad_input_exits_2_before_any_query(tmp_path: Path, args: list[str], message: str) -> None:
    r = CliRunner().invoke(main, ["dns", "check", *args, "-i", str(_inventory(tmp_path))])
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output


def test_a_zone_check_without_zones_in_the_inventory_exits_2(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["dns", "check", "-i", str(_inventory(tmp_path, dns=False))])
    assert r.exit_code == 2, r.output
    assert "no dns.zones" in r.output
