"""The DNS trust layer as plain data: names, reserved spaces, values, endpoints, JSON
limits, and the bytes each provider would send for hostile input (nothing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from provision.dns.migrate import journal, trust
from provision.dns.migrate.marker import Marker
from provision.dns.provider import ProviderError
from provision.dns.providers.route53 import Route53Provider
from provision.dns.rrset import RRset, rrset
from provision.dns.zone_plan import ChangeSet, plan_zone
from provision.dnsdata import endpoint, names
from provision.errors import UsageError

ZONE = "example.org."
T0 = 1_800_000_000.0


# --- names ---------------------------------------------------------------------------------

@pytest.mark.parametrize("spelling", ["api", "API", "api.example.org", "Api.Example.Org",
                                      "api.example.org."])
def test_one_name_however_spelled(spelling: str) -> None:
    assert names.canonical(spelling, "Example.ORG.") == "api.example.org."


def test_limits_are_counted_once_absolute_and_leave_room_for_the_marker() -> None:
    label = "a" * 63
    assert names.problem(f"{label}.{ZONE}") == ""
    assert "at most 63" in names.problem(f"{'a' * 64}.{ZONE}")
    long = ".".join(["a" * 50] * 5) + "." + ZONE            # 267 octets
    assert "at most 253" in names.problem(long)
    fits = ".".join(["a" * 50] * 4) + "." + "b" * 20 + "." + ZONE  # 236 octets
    assert names.problem(fits) == ""
    assert "marker prefix" in names.problem(fits, room=names.MARKER_ROOM)


@pytest.mark.parametrize("name", ["_wildcard.example.org.", "_provision.api.example.org.",
                                  "_provision-migration.api.example.org."])
def test_reserved_first_labels_are_refused(name: str) -> None:
    assert "reserved" in names.reserved(name)
    with pytest.raises(names.BadName, match="reserved"):
        names.check_record(name, ZONE)


def test_marker_and_journal_spellings_are_injective_on_accepted_names() -> None:
    from provision.dns.markers import marker_name

    accepted = ["*.example.org.", "wildcard.example.org.", "x._wildcard.example.org.",
                "a.b.example.org.", "a-b.example.org.", "a_b.example.org."]
    for n in accepted:
        names.check_record(n, ZONE)
    assert len({marker_name(n, ZONE) for n in accepted}) == len(accepted)
    assert len({journal.file_name(n) for n in accepted}) == len(accepted)


# --- ownership markers in the plan ------------------------------------------------------------

def _txt(name: str, *strings: str) -> RRset:
    return rrset(name, "TXT", 300, [f'"{s}"' for s in strings])


def test_an_ownership_marker_claiming_ns_refuses_the_plan_and_sends_nothing() -> None:
    ns = rrset(ZONE, "NS", 3600, ["ns1.example.net."])
    plan = plan_zone(ZONE, [], [ns, _txt("_provision.example.org.", "provision owns NS")])
    assert plan.refused and "_provision.example.org. TXT is refused" in plan.errors[0]
    assert not plan.change_set


def test_an_apex_record_owned_but_undeclared_is_not_deleted() -> None:
    apex = rrset(ZONE, "A", 300, ["192.0.2.80"])
    plan = plan_zone(ZONE, [], [apex, _txt("_provision.example.org.", "provision owns A")])
    assert not plan.refused and not plan.change_set
    assert any("not deleted" in n for n in plan.notes)


def test_an_owned_record_below_the_apex_is_still_deleted() -> None:
    """The guard above stays narrow: the ordinary ownership rule still works."""
    old = rrset("old.example.org.", "A", 300, ["192.0.2.9"])
    plan = plan_zone(ZONE, [], [old, _txt("_provision.old.example.org.", "provision owns A")])
    assert [c.op for c in plan.changes] == ["delete"]


def test_provider_values_that_are_not_addresses_refuse_the_plan() -> None:
    want = [rrset("api.example.org.", "A", 300, ["192.0.2.1"])]
    bad = RRset("api.example.org.", "A", 300, ("192.0.2.1 ; evil",))
    plan = plan_zone(ZONE, want, [bad])
    assert plan.refused and "the provider's answer is refused" in plan.errors[0]
    assert not plan.change_set


# --- journals -------------------------------------------------------------------------------

GOOD: dict[str, Any] = {
    "version": 1, "name": "api.example.org.", "type": "A", "zone": ZONE, "provider": "rfc2136",
    "original_values": ["192.0.2.1"], "original_ttl": 3600, "target_values": ["192.0.2.2"],
    "lower_ttl": 60, "phase": "lowered", "started_at": T0, "lowered_at": T0 + 1,
    "history": [[T0, "started"]]}


def test_a_good_journal_round_trips() -> None:
    j = trust.from_json(json.dumps(GOOD))
    assert trust.from_json(journal.to_json(j)) == j


@pytest.mark.parametrize(("change", "why"), [
    ({"type": "NS"}, "type 'NS'"), ({"type": "TXT"}, "type 'TXT'"),
    ({"name": "API.example.org."}, "absolute, lowercase"),
    ({"name": "_wildcard.example.org."}, "reserved"),
    ({"original_values": ["192.0.2.1\n"]}, "not an IPv4"),
    ({"target_values": []}, "no values"), ({"original_ttl": 0}, "TTL '0'"),
    ({"original_ttl": 1.5}, "TTL '1.5'"), ({"started_at": "yesterday"}, "not a time"),
    ({"forced": "yes"}, "not true or false"), ({"extra": 1}, "unknown field"),
    ({"history": [[T0]]}, "not a [time, event] pair"), ({"provider": "dyn"}, "provider 'dyn'"),
])
def test_a_journal_field_out_of_bounds_is_refused(change: dict[str, Any], why: str) -> None:
    with pytest.raises(trust.Untrusted, match=why.replace("[", r"\[").replace(".", r"\.")):
        trust.from_json(json.dumps({**GOOD, **change}))


def test_json_limits() -> None:
    with pytest.raises(trust.Untrusted, match="nested"):
        trust.parse_json(b"[" * 10_000 + b"]" * 10_000)
    with pytest.raises(trust.Untrusted, match="digits"):
        trust.parse_json(b'{"a": ' + b"1" * 100 + b"}")
    with pytest.raises(trust.Untrusted, match="not UTF-8"):
        trust.parse_json(b'{"a": "\xc3"}')
    with pytest.raises(trust.Untrusted, match="appears twice"):
        trust.parse_json(b'{"a": 1, "a": 2}')
    with pytest.raises(trust.Untrusted, match="Infinity is not a number"):
        trust.parse_json(b'{"a": Infinity}')
    # brackets inside strings are no nesting
    assert trust.parse_json(json.dumps({"a": "[" * 100}).encode()) == {"a": "[" * 100}


def test_a_journal_acts_only_on_the_record_it_is_filed_under() -> None:
    j = trust.from_json(json.dumps(GOOD))
    kw: dict[str, Any] = {"zone": "example.org", "provider": "rfc2136", "declared": frozenset()}
    trust.admit_journal(j, name="api.example.org.", **kw)
    with pytest.raises(trust.Untrusted, match="filed under www"):
        trust.admit_journal(j, name="www.example.org.", **kw)
    with pytest.raises(trust.Untrusted, match="uses route53"):
        trust.admit_journal(j, name="api.example.org.", **{**kw, "provider": "route53"})
    apex = trust.from_json(json.dumps({**GOOD, "name": ZONE}))
    with pytest.raises(trust.Untrusted, match="zone apex"):
        trust.admit_journal(apex, name=ZONE, **kw)
    trust.admit_journal(apex, name=ZONE, **{**kw, "declared": frozenset({(ZONE, "A")})})


def test_a_marker_is_checked_against_its_journal_and_the_clock() -> None:
    m = Marker("lowered", "A", 300, 60, T0, T0 + 1, ("192.0.2.1",), ("192.0.2.2",))
    kw: dict[str, Any] = {"name": "api.example.org.", "zone": ZONE, "declared": frozenset(),
                          "journal": None, "now": T0 + 10}
    trust.admit_marker(m, **kw)
    cname = trust.from_json(json.dumps({**GOOD, "type": "CNAME",
                                          "original_values": ["a.example.org."],
                                          "target_values": ["b.example.org."]}))
    with pytest.raises(trust.Untrusted, match="the CNAME record"):
        trust.admit_marker(m, **{**kw, "journal": cname})
    with pytest.raises(trust.Untrusted, match="not plausible"):
        trust.admit_marker(m, **{**kw, "now": T0 - 1000})
    assert "appears 2 times" in trust.marker_strings_problem(('"phase=lowered"', '"phase=switched"'))


def test_a_fifo_journal_is_refused_without_hanging(tmp_path: Path) -> None:
    import os

    from provision.dns.migrate.store import JournalStore

    store = JournalStore(tmp_path)
    os.mkfifo(store.path("api.example.org."))
    with pytest.raises(UsageError, match="not a regular file"):
        store.load("api.example.org.")
    assert store.all()[0][1] is None and "not a regular file" in store.all()[0][2]


# --- credentials over plain HTTP --------------------------------------------------------

@pytest.mark.parametrize(("url", "ok"), [
    ("https://route53.amazonaws.com", True), ("http://127.0.0.1:5000", True),
    ("http://[::1]:8080", True), ("http://localhost:9", True), ("http://127.9.9.9", True),
    ("http://10.0.0.5:5000", False), ("http://dns.example.net", False),
    ("http://127.0.0.1.evil.example", False), ("ftp://127.0.0.1", False),
])
def test_credentials_go_over_https_or_to_loopback(url: str, ok: bool) -> None:
    assert (endpoint.problem(url, "the endpoint") == "") is ok


def test_route53_refuses_a_plain_http_endpoint_before_any_client_exists(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def no_network(*a: Any, **k: Any) -> None:
        raise AssertionError("a connection was attempted")

    monkeypatch.setattr(socket, "create_connection", no_network)
    p = Route53Provider(ZONE, endpoint_url="http://192.0.2.10:5000", hosted_zone_id="Z1")
    with pytest.raises(ProviderError, match="not a loopback address"):
        p.list_rrsets()
    assert p._client is None  # boto3 never built a client, so nothing was signed


def test_clouddns_refuses_a_token_uri_in_clear(tmp_path: Path) -> None:
    from provision.dns.providers.clouddns import CloudDnsProvider

    creds = tmp_path / "sa.json"
    creds.write_text(json.dumps({"type": "service_account", "token_uri": "http://10.9.9.9/token",
                                 "client_email": "x@y", "private_key": "k"}))
    p = CloudDnsProvider(ZONE, project="my-project", managed_zone="z",
                         endpoint="https://dns.googleapis.com", credentials_file=str(creds))
    with pytest.raises(UsageError, match=r"token_uri .* not a loopback address"):
        p.mz  # noqa: B018
    p2 = CloudDnsProvider(ZONE, project="my-project", managed_zone="z",
                          endpoint="http://10.1.1.1:8080", credentials_file=str(creds))
    with pytest.raises(ProviderError, match=r"endpoint http://10\.1\.1\.1:8080 is plain http"):
        p2.mz  # noqa: B018


def test_a_non_provider_endpoint_is_named_in_the_plan_header(tmp_path: Path) -> None:
    from provision.commands.dns import zone_endpoint
    from provision.inventory import load_inventory

    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, "aws": {"region": "us-east-1",
                                                       "endpoint_url": "http://127.0.0.1:5000"},
                                 "dns": {"zones": {
                                     "a.example": {"provider": "route53"},
                                     "b.example": {"provider": "clouddns", "project": "my-project",
                                                   "managed_zone": "b",
                                                   "endpoint": "https://dns.googleapis.com"}}}}))
    inv = load_inventory(p)
    assert inv.dns is not None
    a, b = inv.dns.zones
    assert zone_endpoint(a, inv) == "http://127.0.0.1:5000"
    assert zone_endpoint(b, inv) is None  # the provider's own: nothing to point out


# --- bytes that would be sent ----------------------------------------------------------------

def test_route53_answers_that_do_not_parse_are_provider_errors() -> None:
    class Client:
        def list_resource_record_sets(self, **kw: Any) -> dict[str, Any]:
            return {"ResourceRecordSets": [{"Name": "api.example.org.", "Type": "A",
                                            "TTL": "soon", "ResourceRecords": []}]}

    p = Route53Provider(ZONE, hosted_zone_id="Z1", client=Client())
    with pytest.raises(ProviderError, match="a malformed answer"):
        p.list_rrsets()


def test_route53_paging_in_a_circle_ends() -> None:
    class Client:
        def list_resource_record_sets(self, **kw: Any) -> dict[str, Any]:
            return {"ResourceRecordSets": [], "IsTruncated": True,
                    "NextRecordName": "a.example.org.", "NextRecordType": "A"}

    p = Route53Provider(ZONE, hosted_zone_id="Z1", client=Client())
    with pytest.raises(ProviderError, match="does not end"):
        p.list_rrsets()


def test_rfc2136_refuses_to_build_an_update_from_unwritable_data(tmp_path: Path) -> None:
    from provision.dns.providers.rfc2136 import CAPABILITIES
    from provision.dns.providers.rfc2136_client import Rfc2136Provider

    key = tmp_path / "k.key"
    key.write_text("hmac-sha256:k:c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=")
    p = Rfc2136Provider("example.org", "127.0.0.1", 53, str(key),
                        capabilities=CAPABILITIES)
    bad = RRset("api.example.org.", "A", 300, ("not-an-address",))
    with pytest.raises(ProviderError, match="nothing was sent"):
        p.update_message(ChangeSet((bad,), ()))


def test_status_of_a_name_in_no_zone_exits_2(tmp_path: Path) -> None:
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, "dns": {"zones": {"example.org": {
        "provider": "rfc2136", "server": "127.0.0.1", "tsig_key_file": "tsig.key"}}}}))
    r = CliRunner().invoke(main, ["dns", "migrate", "status", "api.example.net", "-i", str(p)])
    assert r.exit_code == 2, r.output
    assert "in none of the inventory's zones" in r.output


def test_relative_key_paths_are_taken_from_the_inventory_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.inventory import load_inventory

    d = tmp_path / "inv"
    d.mkdir()
    (d / "inv.yml").write_text(yaml.safe_dump({"version": 1, "dns": {"zones": {"lab.test": {
        "provider": "rfc2136", "server": "127.0.0.1", "tsig_key_file": "keys/tsig.key"},
        "gcp.test": {"provider": "clouddns", "project": "my-project", "managed_zone": "g",
                     "credentials_file": "~/.config/provision/sa.json"}}}}))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    inv = load_inventory(d / "inv.yml")
    assert inv.dns is not None
    lab, gcp = (next(z for z in inv.dns.zones if z.name == n) for n in ("lab.test", "gcp.test"))
    assert lab.settings.tsig_key_file == str(d / "keys" / "tsig.key")
    assert gcp.settings.credentials_file == str(tmp_path / "home" / ".config" / "provision" /
                                                "sa.json")


@pytest.mark.parametrize(("field", "doc", "words"), [
    ("aws.region", {"aws": {"region": "US-East-1"}}, "an AWS region name: lowercase words"),
    ("vpc", {"aws": {"region": "us-east-1", "security_groups": {"g": {"vpc": "vpc_1"}}}},
     "a VPC id: 'vpc-' and 1 to 17 lowercase hex digits"),
    ("id", {"aws": {"region": "us-east-1", "security_groups": {"g": {"id": "sg-XYZ"}}}},
     "a security group id: 'sg-'"),
    ("project", {"dns": {"zones": {"e.org": {"provider": "clouddns", "project": "P",
                                             "managed_zone": "z"}}}}, "a Google Cloud project id"),
    ("managed_zone", {"dns": {"zones": {"e.org": {"provider": "clouddns", "project": "my-project",
                                                  "managed_zone": "Zone_1"}}}},
     "a Cloud DNS managed zone name"),
])
def test_provider_ids_are_explained_in_words_not_patterns(
        tmp_path: Path, field: str, doc: dict[str, Any], words: str) -> None:
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, **doc}))
    r = CliRunner().invoke(main, ["check", "-i", str(p)])
    assert r.exit_code == 2, r.output
    assert words in r.output and "^" not in r.output, r.output


def test_dns_check_of_a_name_that_is_no_name_is_exit_2(tmp_path: Path) -> None:
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, "dns": {"zones": {"example.org": {
        "provider": "rfc2136", "server": "127.0.0.1", "tsig_key_file": "tsig.key"}}}}))
    for bad in ("a..b.example.org", "x" * 64 + ".example.org"):
        r = CliRunner().invoke(main, ["dns", "check", bad, "-i", str(p)])
        assert r.exit_code == 2, r.output
        assert "is not a record name" in r.output, r.output
        assert "Traceback" not in r.output and isinstance(r.exception, SystemExit)


def test_check_names_a_refused_journal_in_the_state_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state"
    (state / "migrations").mkdir(parents=True)
    monkeypatch.setenv("PROVISION_STATE_DIR", str(state))
    wrong = {**GOOD, "name": "www.example.org."}  # filed under api: not its own name
    (state / "migrations" / "api.example.org.json").write_text(json.dumps(wrong))
    example = Path(__file__).parents[2] / "inventories" / "example.yml"
    # --no-local-files: the example's key (~/.ssh/id_ed25519) is not on every test machine
    r = CliRunner().invoke(main, ["check", "-i", str(example), "--json", "--no-local-files"])
    assert r.exit_code == 0, r.output
    found = [f for f in json.loads(r.stdout)["findings"] if f["code"] == "dns-journal-refused"]
    assert len(found) == 1 and "api.example.org.json" in found[0]["message"]
    assert "filed as api.example.org.json" in found[0]["message"]


def test_hostile_route53_answers_never_reach_a_change_batch(tmp_path: Path) -> None:
    """The plan from hostile Route53 answers is refused, and `dns apply`'s path sends no
    ChangeResourceRecordSets call (the stub records every call it gets)."""
    from provision.dns.sync import apply_zone, plan_zones
    from provision.inventory import load_inventory

    calls: list[str] = []

    class Client:
        def list_resource_record_sets(self, **kw: Any) -> dict[str, Any]:
            calls.append("list")
            return {"ResourceRecordSets": [
                {"Name": "example.org.", "Type": "NS", "TTL": 172800,
                 "ResourceRecords": [{"Value": "ns-1.awsdns-00.com."}]},
                {"Name": "api.example.org.", "Type": "A", "TTL": 60,
                 "ResourceRecords": [{"Value": "192.0.2.1\nevil"}]},
                {"Name": "_provision.example.org.", "Type": "TXT", "TTL": 300,
                 "ResourceRecords": [{"Value": '"provision owns NS"'}]}]}

        def change_resource_record_sets(self, **kw: Any) -> dict[str, Any]:
            calls.append("change")
            return {"ChangeInfo": {"Id": "C1"}}

    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, "dns": {"zones": {"example.org": {
        "provider": "route53", "hosted_zone_id": "Z1",
        "records": {"api": {"type": "A", "values": ["192.0.2.2"]}}}}}}))
    inv = load_inventory(p)
    assert inv.dns is not None
    [run] = plan_zones(inv, list(inv.dns.zones), lambda z, i: Route53Provider(
        z.name, hosted_zone_id="Z1", client=Client()))
    assert run.plan is not None and run.plan.refused
    assert any("provider's answer is refused" in e for e in run.plan.errors)
    assert any("_provision.example.org. TXT is refused" in e for e in run.plan.errors)
    apply_zone(run)  # what `dns apply` calls for a zone: an empty change set sends nothing
    assert calls == ["list"]


# --- which secret, from where, sent where (issue 34, class 3) ----------------------------------

@pytest.mark.parametrize(("url", "origin", "name"), [
    ("https://PDNS.example.net:8081/api", "https://pdns.example.net:8081", "pdns.example.net_8081.key"),
    ("https://pdns.example.net", "https://pdns.example.net:443", "pdns.example.net_443.key"),
    ("http://127.0.0.1:8081/", "http://127.0.0.1:8081", "127.0.0.1_8081.key"),
    ("http://[::1]:8081", "http://[::1]:8081", "::1_8081.key"),
])
def test_a_key_is_bound_to_the_server_by_its_origin_and_file_name(url: str, origin: str,
                                                                  name: str) -> None:
    from provision.dnsdata import secrets

    assert secrets.origin(url) == origin
    assert secrets.url_key_name(url) == name


def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return home


def test_an_inventory_in_your_home_directory_has_no_tree_for_keys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its tree would hold every file of yours: keys go in ~/.config/provision then."""
    home = _home(tmp_path, monkeypatch)
    (home / "keys").mkdir()
    inv = home / "inventory.yml"
    inv.write_text(yaml.safe_dump({"version": 1, "dns": {"zones": {"example.org": {
        "provider": "rfc2136", "server": "127.0.0.1", "tsig_key_file": "keys/tsig.key"}}}}))
    r = CliRunner().invoke(main, ["check", "-i", str(inv)])
    assert r.exit_code == 2, r.output
    assert (f"{home}/keys/tsig.key is outside your provision config directory "
            f"{home}/.config/provision (the inventory's directory {home} is your home "
            "directory or above it") in " ".join(r.output.split()), r.output
    inv.write_text(inv.read_text().replace("keys/tsig.key", "~/.config/provision/tsig.key"))
    assert CliRunner().invoke(main, ["check", "-i", str(inv)]).exit_code == 0
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))  # the config dir moved
    r = CliRunner().invoke(main, ["check", "-i", str(inv)])
    assert r.exit_code == 2 and f"{tmp_path}/xdg/provision" in r.output, r.output


def test_check_names_every_zones_credential_and_where_it_goes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    monkeypatch.delenv("PROVISION_POWERDNS_API_KEY", raising=False)
    d = tmp_path / "inv"
    d.mkdir()
    (d / "inventory.yml").write_text(yaml.safe_dump({"version": 1, "dns": {"zones": {
        "a.example": {"provider": "rfc2136", "server": "192.0.2.53", "tsig_key_file": "t.key"},
        "b.example": {"provider": "clouddns", "project": "my-project", "managed_zone": "b"},
        "c.example": {"provider": "clouddns", "project": "my-project", "managed_zone": "c",
                      "endpoint": "http://127.0.0.1:8089"},
        "d.example": {"provider": "route53"},
        "e.example": {"provider": "powerdns", "api_url": "https://pdns.example.net:8081"},
        "f.example": {"provider": "powerdns", "api_url": "https://pdns.example.net:8081",
                      "api_key_file": "pdns.example.net_8081.key"}}}}))
    r = CliRunner().invoke(main, ["check", "-i", str(d / "inventory.yml")])
    lines = [ln for ln in r.output.splitlines() if ln.startswith("credentials: ")]
    assert lines == [
        f"credentials: rfc2136 zone a.example: TSIG key from {d}/t.key, signs the requests "
        "sent to 192.0.2.53 port 53",
        "credentials: clouddns zone b.example: a Google token from Application Default "
        "Credentials (gcloud), sent to https://dns.googleapis.com",
        "credentials: clouddns zone c.example: no credentials (anonymous requests to a local "
        "fake), sent to http://127.0.0.1:8089",
        "credentials: route53 zone d.example: AWS credentials from boto3's default chain "
        "($AWS_* variables, ~/.aws), signing the requests sent to AWS (route53.amazonaws.com)",
        "credentials: powerdns zone e.example: API key from nowhere on this machine "
        "($PROVISION_POWERDNS_API_KEY is not set; set it and PROVISION_POWERDNS_API_URL="
        "https://pdns.example.net:8081, or give api_key_file (pdns.example.net_8081.key in "
        f"the inventory's directory or {tmp_path}/home/.config/provision)), sent to "
        "https://pdns.example.net:8081",
        f"credentials: powerdns zone f.example: API key from {d}/pdns.example.net_8081.key, "
        "sent to https://pdns.example.net:8081",
    ], r.output
