"""TXT, MX, SRV and CAA: one canonical value whatever the provider's spelling (fixture
data in tests/fixtures/dns_values/), the inventory's values refused in words, the trust
rules (migrations stay A/AAAA/CNAME; ownership markers cover the new types and nothing
else), and records generated from the hosts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import pytest

from provision.dns.markers import marker_rrset
from provision.dns.migrate.guard import review
from provision.dns.migrate.trust import Untrusted, journal_from_dict
from provision.dns.providers.powerdns import parse_zone
from provision.dns.providers.route53 import Route53Provider
from provision.dns.rrset import RRset, rrset
from provision.dns.zone_plan import plan_zone
from provision.dnsdata import providers
from provision.dnsdata.provider_settings import Capabilities
from provision.dnsdata.rdata import BadValue, declared, value_problem
from provision.inventory import load_inventory
from provision.inventory.errors import InventoryError
from provision.inventory.from_hosts import HostIn, Spec, generate, template_problem

FIXTURES = Path(__file__).parents[1] / "fixtures" / "dns_values"
NORMALISE = json.loads((FIXTURES / "normalise.json").read_text())["cases"]
REFUSED = json.loads((FIXTURES / "refused.json").read_text())["cases"]
Z = "example.org."


def _route53(rtype: str, value: str) -> tuple[str, ...]:
    rr = Route53Provider(Z)._from_api({"Name": Z, "Type": rtype, "TTL": "300",
                                       "ResourceRecords": [{"Value": value}]})
    return rr.values


def _clouddns(rtype: str, value: str) -> tuple[str, ...]:
    return rrset(Z, rtype, 300, [value]).values       # what list_rrsets makes of an rrdata


def _powerdns(rtype: str, value: str) -> tuple[str, ...]:
    body = {"rrsets": [{"name": Z, "type": rtype, "ttl": 300,
                        "records": [{"content": value, "disabled": False}]}]}
    return parse_zone(json.dumps(body).encode(), Z)[0].values


def _rfc2136(rtype: str, value: str) -> tuple[str, ...]:
    """As a zone transfer hands it over: wire data, read back by dnspython."""
    rd = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.from_text(rtype), value,
                             origin=dns.name.root, relativize=False)
    wire = rd.to_wire()
    back = dns.rdata.from_wire(dns.rdataclass.IN, rd.rdtype, wire, 0, len(wire))
    return rrset(Z, rtype, 300, [back.to_text()]).values


READ = {"route53": _route53, "clouddns": _clouddns, "powerdns": _powerdns, "rfc2136": _rfc2136}


@pytest.mark.parametrize("case", NORMALISE, ids=[f"{c['type']}-{i}" for i, c in enumerate(NORMALISE)])
def test_every_spelling_is_one_canonical_value(case: dict[str, Any]) -> None:
    if case["inventory"] is not None:
        assert declared(case["type"], case["inventory"]) == case["canonical"]
    assert case["answers"]
    for provider, spellings in case["answers"].items():
        for s in spellings:
            assert READ[provider](case["type"], s) == (case["canonical"],), (provider, s)
    assert value_problem(case["type"], case["canonical"]) == ""


@pytest.mark.parametrize("case", NORMALISE, ids=[f"{c['type']}-{i}" for i, c in enumerate(NORMALISE)])
def test_route53_writes_what_it_reads_back(case: dict[str, Any]) -> None:
    rr = rrset(Z, case["type"], 300, [case["canonical"]])
    sent = Route53Provider._to_api(rr)
    assert Route53Provider(Z)._from_api({**sent, "TTL": str(sent["TTL"])}) == rr


@pytest.mark.parametrize("spoof", ["a\\056b.example.org.", "a\\134056b.example.org.",
                                   "_provision\\056a.b.example.org."])
def test_route53_an_escaped_dot_or_backslash_in_a_label_is_no_label_separator(spoof: str) -> None:
    """`a\\056b` is the one label 'a.b' (Route53 spells every byte outside a-z, 0-9, '-'
    and '_' as an octal escape): read as two labels it was the name a.b.example.org., and
    a record there (or a marker) took the place of the real one's in the listing."""
    def name(n: str) -> str:
        return Route53Provider(Z)._from_api({"Name": n, "Type": "A", "TTL": "300",
                                             "ResourceRecords": [{"Value": "192.0.2.1"}]}).name

    assert name("A\\052.Example.org.") == "a*.example.org."      # other escapes: the byte
    assert name("a.b.example.org.") == "a.b.example.org."
    got = name(spoof)
    assert got not in ("a.b.example.org.", "_provision.a.b.example.org.")
    assert "\\" in got


def test_route53_text_escapes_are_octal_on_its_side() -> None:
    rr = rrset(Z, "TXT", 300, ['"caf\\195\\169"'])
    assert Route53Provider._to_api(rr)["ResourceRecords"] == [{"Value": '"caf\\303\\251"'}]


@pytest.mark.parametrize("case", REFUSED, ids=[f"{c['type']}-{i}" for i, c in enumerate(REFUSED)])
def test_bad_values_are_refused_in_words(case: dict[str, Any]) -> None:
    with pytest.raises(BadValue) as e:
        declared(case["type"], case["value"])
    assert re.search(case["error"], str(e.value)), str(e.value)


def test_a_long_plain_text_is_split_into_255_octet_strings() -> None:
    text = "k=" + "x" * 600
    value = declared("TXT", text)
    strings = re.findall(r'"([^"]*)"', value)
    assert [len(s) for s in strings] == [255, 255, 92] and "".join(strings) == text


# --- the plan and the trust rules -----------------------------------------------------------

def _rr(name: str, rtype: str, *values: str, ttl: int = 300) -> RRset:
    return rrset(name if name.endswith(".") else f"{name}.{Z}", rtype, ttl, values)


SOA = _rr(Z, "SOA", "ns1.example.org. h.example.org. 1 3600 600 86400 5")


def test_an_owned_mx_removed_from_the_inventory_is_deleted_with_its_marker() -> None:
    mx = _rr("mail", "MX", "10 mx1.example.org.")
    have = [SOA, mx, marker_rrset(f"mail.{Z}", Z, ["MX"])]
    plan = plan_zone(Z, [], have)
    assert [(c.op, c.key) for c in plan.changes] == [("delete", (f"mail.{Z}", "MX"))]
    assert plan.change_set.deletions == (mx, have[2])


def test_a_marker_claiming_a_txt_at_the_apex_does_not_delete_it() -> None:
    spf = _rr(Z, "TXT", '"v=spf1 -all"')
    have = [SOA, spf, marker_rrset(Z, Z, ["TXT"])]
    plan = plan_zone(Z, [], have)
    assert plan.changes == () and not plan.change_set
    assert any("not deleted" in n for n in plan.notes)


@pytest.mark.parametrize("claim", ["NS", "SOA", "PTR", "TXT "])
def test_a_marker_claiming_another_type_is_refused(claim: str) -> None:
    bad = RRset(f"_provision.www.{Z}", "TXT", 300, (f'"provision owns {claim}"',))
    plan = plan_zone(Z, [], [SOA, _rr("www", "NS", "ns.evil.example."), bad])
    assert plan.refused and "is not one provision writes" in plan.errors[0]


@pytest.mark.parametrize("covered", ["_provision-migration.api", "_provision-closed-a.api",
                                     "_provision.api"])
def test_a_marker_claiming_the_txt_of_provisions_own_markers_is_refused(covered: str) -> None:
    """"provision owns TXT" is new: it must never reach provision's own TXT records."""
    target = _rr(covered, "TXT", '"phase=lowered"')
    bad = RRset(f"_provision.{covered}.{Z}", "TXT", 300, ('"provision owns TXT"',))
    plan = plan_zone(Z, [], [SOA, target, bad])
    assert plan.refused and any("reserved for provision's markers" in e for e in plan.errors)
    assert not plan.change_set


def test_a_migration_marker_holds_only_the_record_it_migrates() -> None:
    """A migration moves A/AAAA/CNAME values: the TXT beside it is changed as usual."""
    marker = RRset(f"_provision-migration.api.{Z}", "TXT", 60, ('"phase=lowered"',))
    have = [SOA, _rr("api", "A", "192.0.2.1"), _rr("api", "TXT", '"old"'), marker]
    want = [_rr("api", "A", "192.0.2.2"), _rr("api", "TXT", '"new"')]
    plan = plan_zone(Z, want, have)
    assert [c.key for c in plan.changes] == [(f"api.{Z}", "TXT")]


def test_a_txt_change_above_the_cutover_ttl_is_a_plain_change() -> None:
    have = [SOA, _rr("www", "TXT", '"old"', ttl=3600), _rr("api", "A", "192.0.2.1", ttl=3600)]
    want = [_rr("www", "TXT", '"new"', ttl=3600), _rr("api", "A", "192.0.2.9", ttl=3600)]
    r = review(Z, want, have, now=1.8e9)
    assert [c.type for c in r.cutovers] == ["A"]
    assert (f"www.{Z}", "TXT") not in r.hold


def test_a_journal_for_a_txt_record_is_refused() -> None:
    j = {"version": 1, "zone": Z, "provider": "route53", "name": f"www.{Z}", "type": "TXT",
         "phase": "lowered", "original_values": ['"a"'], "target_values": ['"b"'],
         "original_ttl": 300, "lower_ttl": 60, "started_at": 1.8e9}
    with pytest.raises(Untrusted, match="provision migrates only A, AAAA, CNAME records"):
        journal_from_dict(j)


# --- the inventory: types a provider cannot write, records from the hosts --------------------

def _load(tmp_path: Path, text: str) -> Any:
    p = tmp_path / "inv.yml"
    p.write_text(text)
    return load_inventory(p)


def _problems(tmp_path: Path, text: str) -> str:
    with pytest.raises(InventoryError) as e:
        _load(tmp_path, text)
    return str(e.value)


ZONE = """version: 1
hosts:
  gpu1: {address: 10.0.1.21, roles: [gpu]}
  gpu2: {address: "fd00::22", roles: [gpu]}
  web: {address: 10.0.1.30}
roles:
  gpu: {}
dns:
  zones:
    example.org:
      provider: route53
      FROM
      records:
        mx: {type: MX, values: ["10 mx1.example.org"]}
"""


def test_a_type_the_provider_cannot_write_is_refused_at_its_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    caps = providers.capabilities("route53")
    narrow = Capabilities(**{**caps.__dict__, "record_types": frozenset({"A", "AAAA", "CNAME", "TXT"})})
    monkeypatch.setattr(providers.load("route53"), "CAPABILITIES", narrow)
    out = _problems(tmp_path, ZONE.replace("FROM", "from_hosts: false"))
    assert re.search(r"inv.yml:14:9: dns.zones.example.org.records.mx: provider route53 does "
                     r"not support MX records \(it writes A, AAAA, CNAME, TXT\)", out), out


def test_every_provider_writes_the_four_new_types() -> None:
    for name in providers.names():
        assert {"TXT", "MX", "SRV", "CAA"} <= providers.capabilities(name).record_types, name


def test_from_hosts_true_gives_every_host_its_name(tmp_path: Path) -> None:
    inv = _load(tmp_path, ZONE.replace("FROM", "from_hosts: true"))
    made = {(r.name, r.type, r.values, r.host) for r in inv.dns.zones[0].records if r.host}
    assert made == {("gpu1", "A", ("10.0.1.21",), "gpu1"), ("gpu2", "AAAA", ("fd00::22",), "gpu2"),
                    ("web", "A", ("10.0.1.30",), "web")}


def test_from_hosts_of_roles_with_a_name_template(tmp_path: Path) -> None:
    inv = _load(tmp_path, ZONE.replace("FROM", 'from_hosts: {roles: [gpu], name: "{host}.gpu", ttl: 60}'))
    made = sorted((r.fqdn(inv.dns.zones[0].name), r.type, r.ttl)
                  for r in inv.dns.zones[0].records if r.host)
    assert made == [("gpu1.gpu.example.org", "A", 60), ("gpu2.gpu.example.org", "AAAA", 60)]


def test_a_generated_name_a_record_declares_is_an_error_at_that_record(tmp_path: Path) -> None:
    text = ZONE.replace("FROM", "from_hosts: true") + \
        "        GPU1: {type: A, values: [10.0.1.99]}\n"
    out = _problems(tmp_path, text)
    assert re.search(r"inv.yml:15:9: dns.zones.example.org.records.GPU1: record 'gpu1' "
                     r"\(gpu1.example.org. A\) is also the A record from_hosts \(at .*inv.yml:12\) "
                     r"makes for host 'gpu1'", out), out


def test_a_generated_name_beside_a_declared_txt_is_no_clash(tmp_path: Path) -> None:
    text = ZONE.replace("FROM", "from_hosts: true") + \
        '        gpu1: {type: TXT, values: ["rack 4"]}\n'
    assert len(_load(tmp_path, text).dns.zones[0].records) == 5


def test_two_hosts_with_one_generated_name_is_an_error(tmp_path: Path) -> None:
    text = ZONE.replace("FROM", "from_hosts: true").replace(
        "  web: {address: 10.0.1.30}", "  web: {address: 10.0.1.30}\n  GPU1: {address: 10.0.1.31}")
    out = _problems(tmp_path, text)
    assert re.search(r"inv.yml:6:3: hosts.GPU1: from_hosts of zone example.org .* makes "
                     r"gpu1.example.org. for host 'GPU1' and for host 'gpu1'", out), out


def test_a_host_addressed_by_name_cannot_get_a_record(tmp_path: Path) -> None:
    text = ZONE.replace("FROM", "from_hosts: true").replace("10.0.1.30", "web.example.net")
    out = _problems(tmp_path, text)
    assert re.search(r"inv.yml:5:\d+: hosts.web.address: from_hosts of zone example.org: its "
                     r"address web.example.net is a DNS name", out), out


@pytest.mark.parametrize(("template", "words"), [
    ("gpu", "must hold '{host}' exactly once"), ("{host}-{host}", "exactly once"),
    ("{host}.{role}", "a placeholder other than '{host}'")])
def test_a_bad_name_template_is_refused(template: str, words: str) -> None:
    assert words in template_problem(template)


def test_generate_is_plain_data_in_and_out() -> None:
    hosts = [HostIn("a", "10.0.0.1", ("gpu",)), HostIn("b", "10.0.0.2", ()),
             HostIn("c", "c.example.net", ("gpu",)), HostIn("_provision", "10.0.0.4", ("gpu",))]
    made, problems = generate("example.org", Spec(("gpu",), "{host}", 300), hosts)
    assert [(g.fqdn, g.type, g.value) for g in made] == [("a.example.org.", "A", "10.0.0.1")]
    assert [h for h, _ in problems] == ["c", "_provision"]
    assert "reserved for provision's markers" in problems[1][1]


def test_check_findings_read_addresses_from_a_and_aaaa_only(tmp_path: Path) -> None:
    """A name with an A and a TXT record: the TXT is no address (it used to be parsed as
    one); a generated record points at its own host, so it is no unknown address."""
    from provision.exposure.dns import dns_findings

    text = ZONE.replace("FROM", "from_hosts: true") + \
        '        api: [{type: A, values: [192.0.2.80]}, {type: TXT, values: ["hello"]}]\n'
    found = dns_findings(_load(tmp_path, text))
    assert [(f.code, f.subject) for f in found] == [("dns-unknown-address", "dns/api.example.org")]


def test_a_migration_never_rewrites_a_generated_record_in_a_file(tmp_path: Path) -> None:
    from provision.inventory.writeback import WriteBackError, prepare

    inv = _load(tmp_path, ZONE.replace("FROM", "from_hosts: true"))
    with pytest.raises(WriteBackError, match=r"from host gpu1's address: set hosts\.gpu1\.address"):
        prepare(inv, "example.org", "gpu1", "A", ("10.0.1.99",))
    assert "10.0.1.21" in (tmp_path / "inv.yml").read_text()


def test_from_hosts_in_a_public_zone_uses_a_hosts_public_address(tmp_path: Path) -> None:
    """A host behind NAT (an elastic IP): its record in a public zone is where the internet
    reaches it; a private zone keeps `address` (read inside the network)."""
    text = ZONE.replace("FROM", "from_hosts: true").replace(
        "gpu1: {address: 10.0.1.21, roles: [gpu]}",
        "gpu1: {address: 10.0.1.21, public_address: 203.0.113.21, roles: [gpu]}")
    inv = _load(tmp_path, text)
    made = {(r.name, r.values) for r in inv.dns.zones[0].records if r.host}
    assert made == {("gpu1", ("203.0.113.21",)), ("gpu2", ("fd00::22",)), ("web", ("10.0.1.30",))}
    assert inv.node("gpu1").public_address == "203.0.113.21"
    from provision.inventory.from_hosts import record_address
    assert record_address("10.0.1.21", "203.0.113.21", "private") == "10.0.1.21"
    assert record_address("gpu1.lan", "2001:db8::21", "public") == "2001:db8::21"
    assert record_address("10.0.1.21", None, "public") == "10.0.1.21"
