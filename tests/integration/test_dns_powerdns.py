"""The PowerDNS provider against the real PowerDNS Authoritative Server (Debian's
pdns-server with the sqlite3 backend) on 127.0.0.1: plan, apply, an empty plan after,
ownership markers, a stale read refused, propagation checked by asking the server (AA),
a cutover migration; and the API's answers as a trust boundary (a loopback HTTP server
that answers what a broken or hostile one would).

Record values are 127.0.0.x / ::1 / names in the test zone: nothing is sent anywhere
but loopback."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from provision.dns.provider import ProviderError, StaleRead
from provision.dns.providers.powerdns import PowerDnsProvider, parse_zone, patch_body
from provision.dns.rrset import rrset
from provision.dns.zone_plan import ChangeSet
from tests.support.powerdns_server import KEY_ENV, URL_ENV, Pdns

_zones = iter(range(1_000_000))


@pytest.fixture
def zone(pdns: Pdns, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh zone on the server for one test (and the API key in the environment, bound
    to the server)."""
    monkeypatch.setenv(KEY_ENV, pdns.key)
    monkeypatch.setenv(URL_ENV, pdns.url)
    z = f"t{next(_zones)}.example.org."
    pdns.create_zone(z)
    yield z
    pdns.delete_zone(z)


def _inv(tmp_path: Path, pdns: Pdns, zone: str, records: dict[str, Any] | None = None,
         **extra: Any) -> str:
    doc = {"version": 1, "dns": {"zones": {zone.rstrip("."): {
        "provider": "powerdns", "api_url": pdns.url,
        "dns_address": "127.0.0.1", "dns_port": pdns.dns_port,
        "records": records or {}, **extra}}}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


RECORDS = {"api": {"type": "A", "values": ["127.0.0.10", "127.0.0.11"], "ttl": 120},
           "v6": {"type": "AAAA", "values": ["::1"], "ttl": 300},
           "www": {"type": "CNAME", "value": "api.ZONE", "ttl": 60}}


def _records(zone: str) -> dict[str, Any]:
    out = json.loads(json.dumps(RECORDS))
    out["www"]["value"] = f"api.{zone}"
    return out


def test_plan_apply_then_the_plan_is_empty_and_the_server_answers(
        pdns: Pdns, zone: str, tmp_path: Path) -> None:
    pdns.set_rrset(zone, f"theirs.{zone}", "A", 300, ["127.0.0.99"])  # someone else's
    inv = _inv(tmp_path, pdns, zone, _records(zone))
    r = _cli("dns", "plan", "-i", inv, "--detailed-exitcode", "--json")
    assert r.exit_code == 3, r.output
    [z] = json.loads(r.stdout)["zones"]
    assert z["provider"] == "powerdns" and z["endpoint"] == pdns.url and not z["error"]
    r = _cli("dns", "apply", "-i", inv, "--yes")
    assert r.exit_code == 0, r.output
    assert "served by every authoritative server" in r.output

    # the effect: the server itself answers, authoritatively
    assert pdns.query(f"api.{zone}", "A") == ("NOERROR", ["127.0.0.10", "127.0.0.11"], True, 120)
    assert pdns.query(f"v6.{zone}", "AAAA") == ("NOERROR", ["::1"], True, 300)
    assert pdns.query(f"www.{zone}", "CNAME") == ("NOERROR", [f"api.{zone}"], True, 60)
    sets = pdns.rrsets(zone)
    assert sets[(f"_provision.api.{zone}", "TXT")] == (300, ['"provision owns A owner=inv"'])
    assert sets[(f"_provision.www.{zone}", "TXT")] == (300, ['"provision owns CNAME owner=inv"'])

    r = _cli("dns", "plan", "-i", inv, "--detailed-exitcode")
    assert r.exit_code == 0, r.output  # no changes means no changes

    # a record taken out of the inventory goes with its marker; someone else's stays
    inv = _inv(tmp_path, pdns, zone, {k: v for k, v in _records(zone).items() if k != "v6"})
    r = _cli("dns", "apply", "-i", inv, "--yes")
    assert r.exit_code == 0, r.output
    sets = pdns.rrsets(zone)
    assert (f"v6.{zone}", "AAAA") not in sets and (f"_provision.v6.{zone}", "TXT") not in sets
    assert sets[(f"theirs.{zone}", "A")] == (300, ["127.0.0.99"])
    assert pdns.query(f"v6.{zone}", "AAAA")[1] == []
    assert _cli("dns", "plan", "-i", inv, "--detailed-exitcode").exit_code == 0


def test_a_record_changed_since_the_read_is_not_overwritten(pdns: Pdns, zone: str) -> None:
    pdns.set_rrset(zone, f"api.{zone}", "A", 300, ["127.0.0.1"])
    p = PowerDnsProvider(zone, pdns.url, pdns.key, dns_port=pdns.dns_port)
    [old] = [rr for rr in p.list_rrsets() if rr.key == (f"api.{zone}", "A")]
    pdns.set_rrset(zone, f"api.{zone}", "A", 300, ["127.0.0.2"])  # someone else, meanwhile
    new = rrset(f"api.{zone}", "A", 300, ["127.0.0.3"])
    with pytest.raises(StaleRead, match="changed since it was read"):
        p.apply(ChangeSet((old,), (new,)))
    with pytest.raises(StaleRead, match="created since"):
        p.apply(ChangeSet((), (new,)))  # "must not exist yet", and it does
    assert pdns.rrsets(zone)[(f"api.{zone}", "A")] == (300, ["127.0.0.2"])


def test_dns_check_asks_the_server_and_names_who_disagrees(
        pdns: Pdns, zone: str, tmp_path: Path) -> None:
    inv = _inv(tmp_path, pdns, zone, _records(zone))
    assert _cli("dns", "apply", "-i", inv, "--yes").exit_code == 0
    r = _cli("dns", "check", f"api.{zone}", "-i", inv, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    [a] = out["answers"]  # ns1.<zone> at 127.0.0.1: the server itself, on its port
    assert (a["server"], a["address"], a["aa"], a["values"]) == (
        f"ns1.{zone}", "127.0.0.1", True, ["127.0.0.10", "127.0.0.11"])
    pdns.set_rrset(zone, f"api.{zone}", "A", 120, ["127.0.0.12"])  # edited behind our back
    r = _cli("dns", "check", f"api.{zone}", "-i", inv, "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["disagree"] == [f"ns1.{zone}"]


def test_a_cutover_migration_against_powerdns(pdns: Pdns, zone: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISION_STATE_DIR", str(tmp_path / "state"))
    name = f"api.{zone}"
    pdns.set_rrset(zone, name, "A", 2, ["127.0.0.1"])
    inv = _inv(tmp_path, pdns, zone)
    r = _cli("dns", "migrate", "run", name, "--to", "127.0.0.2", "--lower-ttl", "1",
             "-i", inv, "--json")
    assert r.exit_code == 0, r.output
    assert set(json.loads(r.stdout)["timings"]) == {"lowered", "switched", "verified", "finalized"}
    sets = pdns.rrsets(zone)
    assert sets[(name, "A")] == (2, ["127.0.0.2"])
    assert (f"_provision-migration.{name}", "TXT") not in sets
    closed = sets[(f"_provision-closed-a.{name}", "TXT")][1]
    assert '"phase=closed"' in closed and '"from=127.0.0.1"' in closed
    assert pdns.query(name, "A") == ("NOERROR", ["127.0.0.2"], True, 2)
    # the finished migration is remembered: the old value cannot come back by accident
    back = _inv(tmp_path, pdns, zone, {"api": {"type": "A", "values": ["127.0.0.1"], "ttl": 2}})
    r = _cli("dns", "apply", "-i", back, "--yes")
    assert r.exit_code == 2 and "--allow-revert" in r.output
    assert pdns.rrsets(zone)[(name, "A")] == (2, ["127.0.0.2"])


def test_a_wrong_api_key_is_an_api_failure(pdns: Pdns, zone: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    inv = _inv(tmp_path, pdns, zone, _records(zone))
    monkeypatch.setenv(KEY_ENV, "not-the-key")
    r = _cli("dns", "plan", "-i", inv)
    assert r.exit_code == 1 and "refused the key" in r.output, r.output
    assert "not-the-key" not in r.output  # the key is never printed


# --- the inventory: settings, and where the key comes from ---------------------------------

def _check(tmp_path: Path, zone: dict[str, Any], *options: str) -> Any:
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, "dns": {"zones": {"example.org": {
        "provider": "powerdns", **zone}}}}))
    return _cli("check", *options, "-i", str(p))


@pytest.mark.parametrize(("zone", "words"), [
    ({"api_url": "http://127.0.0.1:8081", "api_key": "secret"}, "unknown key 'api_key'"),
    ({"api_url": "http://127.0.0.1:8081", "api_key_env": "GITHUB_TOKEN"},
     "'api_key_env' is no longer accepted: an inventory no longer names the variable"),
    ({"api_url": "http://pdns.example.net:8081"}, "not a loopback address"),
    ({"server_id": "localhost"}, "dns.zones.example.org.api_url: required field is missing"),
    ({"api_url": "http://127.0.0.1:8081", "dns_port": 0}, "out of range"),
    ({"api_url": "http://127.0.0.1:8081", "api_key_file": "pdns.key"},
     "pdns.key is not named 127.0.0.1_8081.key: a key file is named for the server"),
    ({"api_url": "https://pdns.example.net", "api_key_file": "keys/127.0.0.1_8081.key"},
     "is not named pdns.example.net_443.key"),
    ({"api_url": "http://127.0.0.1:8081", "api_key_file": "/etc/127.0.0.1_8081.key"},
     "/etc/127.0.0.1_8081.key is outside the inventory's directory"),
])
def test_bad_settings_are_exit_2_at_their_line(tmp_path: Path, zone: dict[str, Any],
                                               words: str) -> None:
    r = _check(tmp_path, zone)
    assert r.exit_code == 2 and words in r.output, r.output
    assert f"{tmp_path / 'inv.yml'}:" in r.output


def test_the_key_file_is_read_by_check(tmp_path: Path) -> None:
    zone = {"api_url": "http://127.0.0.1:8081", "api_key_file": "127.0.0.1_8081.key"}
    key = tmp_path / "127.0.0.1_8081.key"
    # --json: the table wraps a long tmp path (xdist's is longer) across the phrase
    r = _check(tmp_path, zone, "--json")
    warnings = [f["message"] for f in json.loads(r.output)["findings"] if f["severity"] == "warning"]
    assert r.exit_code == 0 and any("is not on this machine" in w for w in warnings), r.output
    key.write_text("two words\n")
    r = _check(tmp_path, zone)
    assert r.exit_code == 2 and "one line without spaces" in r.output, r.output
    key.write_text("k3y\n")
    r = _check(tmp_path, zone)
    assert r.exit_code == 0
    assert (f"credentials: powerdns zone example.org: API key from {key}, sent to "
            "http://127.0.0.1:8081") in r.output, r.output


def test_an_unset_key_variable_is_bad_input_before_anything_is_sent(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, "dns": {"zones": {"example.org": {
        "provider": "powerdns", "api_url": "http://127.0.0.1:9"}}}}))
    r = _cli("dns", "plan", "-i", str(p))
    assert r.exit_code == 2, r.output
    assert (f"no API key for http://127.0.0.1:9: ${KEY_ENV} is not set; set it and "
            f"{URL_ENV}=http://127.0.0.1:9") in r.output, r.output


# --- the API's answers are a trust boundary ------------------------------------------------

Z = "example.org."


def _zone_json(*rrsets: Any) -> bytes:
    return json.dumps({"name": Z, "rrsets": list(rrsets)}).encode()


def _rr(name: str = f"api.{Z}", rtype: str = "A", ttl: Any = 300,
        records: Any = None) -> dict[str, Any]:
    return {"name": name, "type": rtype, "ttl": ttl,
            "records": records if records is not None else [{"content": "127.0.0.1",
                                                             "disabled": False}]}


def test_a_good_answer_is_read_disabled_records_left_out() -> None:
    got = parse_zone(_zone_json(_rr(), _rr(f"x.{Z}", records=[
        {"content": "127.0.0.2", "disabled": True}]), _rr(f"w.{Z}", "CNAME", 60, [
            {"content": "API.Example.Org.", "disabled": False}])), Z)
    assert got == [rrset(f"api.{Z}", "A", 300, ["127.0.0.1"]),
                   rrset(f"w.{Z}", "CNAME", 60, [f"api.{Z}"])]


@pytest.mark.parametrize(("body", "words"), [
    (b"<html>", "not JSON"),
    (b"[" * 100_000, "not JSON"),
    (json.dumps({"rrsets": {}}).encode(), "no list of rrsets"),
    (_zone_json("x"), "not an object"),
    (_zone_json(_rr(name="api\n.example.org.")), "not a DNS name"),
    (_zone_json(_rr(name="api.example.net.")), "outside zone"),
    (_zone_json(_rr(rtype="a b")), "not a record type"),
    (_zone_json(_rr(ttl=-1)), "not a number of seconds"),
    (_zone_json(_rr(ttl=True)), "not a number of seconds"),
    (_zone_json(_rr(ttl="300")), "not a number of seconds"),
    (_zone_json(_rr(records="127.0.0.1")), "records is not a list"),
    (_zone_json(_rr(records=[{"content": "127.0.0.1\nevil", "disabled": False}])), "one line"),
    (_zone_json(_rr(records=[{"content": "\x1b[31m", "disabled": False}])), "one line"),
    (_zone_json(_rr(records=[{"content": "127.0.0.1", "disabled": "no"}])), "'disabled'"),
    (_zone_json(_rr(), _rr()), "listed twice"),
])
def test_a_malformed_answer_is_refused(body: bytes, words: str) -> None:
    with pytest.raises(ProviderError, match=words):
        parse_zone(body, Z)


class _Hostile(http.server.BaseHTTPRequestHandler):
    answers: ClassVar[list[tuple[int, dict[str, str], bytes]]] = []
    seen: ClassVar[list[tuple[str, str, str | None]]] = []

    def _answer(self) -> None:
        self.seen.append((self.command, self.path, self.headers.get("X-API-Key")))
        status, headers, body = self.answers.pop(0)
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", **headers}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PATCH = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hostile() -> Iterator[tuple[PowerDnsProvider, type[_Hostile]]]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    _Hostile.answers, _Hostile.seen = [], []
    yield PowerDnsProvider(Z, f"http://127.0.0.1:{srv.server_address[1]}", "k3y"), _Hostile
    srv.shutdown()
    srv.server_close()


def test_a_redirect_is_not_followed_and_an_error_is_said_escaped(
        hostile: tuple[PowerDnsProvider, type[_Hostile]]) -> None:
    p, h = hostile
    h.answers = [(302, {"Location": "http://127.0.0.2:9/steal"}, b"")]
    with pytest.raises(ProviderError, match=r"redirect .* not followed"):
        p.list_rrsets()
    assert [s[0] for s in h.seen] == ["GET"]  # nothing went to the Location
    h.answers = [(200, {}, _zone_json()), (422, {}, json.dumps(
        {"error": "RRset api.example.org. IN CNAME: Conflicts \x1b[2J"}).encode())]
    with pytest.raises(ProviderError) as e:
        p.apply(ChangeSet((), (rrset(f"api.{Z}", "CNAME", 60, [f"w.{Z}"]),)))
    assert "HTTP 422" in e.value.message and "\x1b" not in e.value.message
    assert h.seen[-1][0] == "PATCH" and h.seen[-1][2] == "k3y"


def test_the_patch_replaces_written_rrsets_and_deletes_gone_ones() -> None:
    old_a = rrset(f"api.{Z}", "A", 300, ["127.0.0.1"])
    gone = rrset(f"old.{Z}", "A", 300, ["127.0.0.5"])
    new_a = rrset(f"api.{Z}", "A", 60, ["127.0.0.2"])
    assert patch_body(ChangeSet((old_a, gone), (new_a,))) == {"rrsets": [
        {"name": f"api.{Z}", "type": "A", "ttl": 60, "changetype": "REPLACE",
         "records": [{"content": "127.0.0.2", "disabled": False}]},
        {"name": f"old.{Z}", "type": "A", "changetype": "DELETE"}]}


@pytest.mark.parametrize("records", [
    [{"content": "127.0.0.7", "disabled": True}],  # not served: the plan sees no RRset
    [{"content": "127.0.0.1", "disabled": False}, {"content": "127.0.0.7", "disabled": True}],
])
def test_a_write_that_would_drop_disabled_records_is_refused_unsent(
        hostile: tuple[PowerDnsProvider, type[_Hostile]], records: list[Any]) -> None:
    """PowerDNS replaces and deletes whole RRsets, disabled records with them; the plan
    reads only served records, so such a write would lose data nobody was shown."""
    p, h = hostile
    served = [r["content"] for r in records if not r["disabled"]]
    old = (rrset(f"api.{Z}", "A", 300, served),) if served else ()
    for change in (ChangeSet(old, (rrset(f"api.{Z}", "A", 300, ["127.0.0.2"]),)),
                   ChangeSet(old, ()) if old else None):
        if change is None:
            continue
        h.answers = [(200, {}, _zone_json(_rr(records=records)))]
        with pytest.raises(ProviderError, match="holds disabled records") as e:
            p.apply(change)
        assert not isinstance(e.value, StaleRead)
        assert [s[0] for s in h.seen if s[0] == "PATCH"] == []


def test_an_answer_dripped_byte_by_byte_ends_at_the_deadline() -> None:
    """Each read has its own timeout, which a byte every 0.1 s never reaches: the whole
    request has a deadline too, so a slow-drip server cannot hold the run."""
    import socket
    import time

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    stop = threading.Event()

    def drip() -> None:
        c, _ = srv.accept()
        c.recv(65536)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
        while not stop.is_set():
            try:
                c.sendall(b" ")
            except OSError:
                break
            time.sleep(0.1)
        c.close()

    t = threading.Thread(target=drip, daemon=True)
    t.start()
    p = PowerDnsProvider(Z, f"http://127.0.0.1:{srv.getsockname()[1]}", "k3y", timeout=5,
                         deadline=1.0)
    try:
        with pytest.raises(ProviderError, match=r"did not answer within 1 s"):
            p.list_rrsets()
    finally:
        stop.set()
        t.join(5)
        srv.close()


# --- which of your secrets, sent where (issue 34, class 3) ------------------------------------
#
# An inventory change in a pull request must not make the reviewer's `dns plan` send one
# of their secrets to a server of the author's choosing. The "author's server" here is a
# loopback HTTP server that records every request and answers an empty zone (so, before,
# the plan went through and the secret arrived in X-API-Key).

SECRET = "ghp_0perat0rSecret"


@pytest.fixture
def catcher() -> Iterator[tuple[str, type[_Hostile]]]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    _Hostile.seen = []
    _Hostile.answers = [(200, {}, _zone_json())] * 20
    yield f"http://127.0.0.1:{srv.server_address[1]}", _Hostile
    srv.shutdown()
    srv.server_close()


def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The operator's home: ~/.aws/credentials, and the real server's key in
    ~/.config/provision (named for that server)."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(SECRET + "\n")
    (home / ".config" / "provision").mkdir(parents=True)
    (home / ".config" / "provision" / "pdns.example.net_8081.key").write_text(SECRET + "\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(URL_ENV, raising=False)
    return home


def _attack(tmp_path: Path, url: str, **zone: str) -> Path:
    tree = tmp_path / "repo"
    tree.mkdir(exist_ok=True)
    p = tree / "inventory.yml"
    p.write_text(yaml.safe_dump({"version": 1, "dns": {"zones": {"example.org": {
        "provider": "powerdns", "api_url": url, "records": {}, **zone}}}}))
    return p


ATTACKS = {
    "env-variable-of-its-choice": ({"api_key_env": "GITHUB_TOKEN"},
                                   "'api_key_env' is no longer accepted"),
    "aws-credentials-file": ({"api_key_file": "~/.aws/credentials"},
                             "is outside the inventory's directory"),
    "symlink-in-the-tree-to-aws-credentials": ({"api_key_file": "LINK"},
                                               "(through a symbolic link, to "),
    "config-key-of-another-server": (
        {"api_key_file": "~/.config/provision/pdns.example.net_8081.key"},
        "is not named 127.0.0.1_"),
    "symlink-named-for-it-to-another-servers-key": ({"api_key_file": "BOUND-LINK"},
                                                    "is not named 127.0.0.1_"),
    "env-key-of-another-server": ({}, f"${KEY_ENV} is for https://pdns.example.net:8081 "
                                      f"(${URL_ENV}), not for this zone's http://127.0.0.1:"),
}


@pytest.mark.parametrize("attack", list(ATTACKS), ids=list(ATTACKS))
def test_an_inventory_cannot_send_your_secret_to_its_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        catcher: tuple[str, type[_Hostile]], attack: str) -> None:
    url, seen = catcher
    home = _home(tmp_path, monkeypatch)
    zone, words = ATTACKS[attack]
    port = url.rsplit(":", 1)[1]
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    if attack == "env-key-of-another-server":  # the operator's key, for their real server
        monkeypatch.setenv(KEY_ENV, SECRET)
        monkeypatch.setenv(URL_ENV, "https://pdns.example.net:8081")
    inv = _attack(tmp_path, url, **zone)
    name = f"127.0.0.1_{port}.key"
    if zone.get("api_key_file") == "LINK":
        (inv.parent / name).symlink_to(home / ".aws" / "credentials")
        inv = _attack(tmp_path, url, api_key_file=name)
    if zone.get("api_key_file") == "BOUND-LINK":
        (inv.parent / name).symlink_to(home / ".config" / "provision" / "pdns.example.net_8081.key")
        inv = _attack(tmp_path, url, api_key_file=name)
    for command in (["dns", "plan"], ["dns", "check", "api"], ["import", "dns", "--zone",
                                                                 "example.org"]):
        r = _cli(*command, "-i", str(inv))
        assert r.exit_code == 2, (command, r.output)
        assert words in " ".join(r.output.split()), r.output
        assert SECRET not in r.output
    assert seen.seen == [], "a request reached the inventory's server"


def test_a_key_bound_to_the_server_is_sent_to_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        catcher: tuple[str, type[_Hostile]]) -> None:
    """The controls: the key file named for the server, in the tree, is sent to it; the
    environment's key is sent where its companion variable says; `check` says which."""
    url, seen = catcher
    _home(tmp_path, monkeypatch)
    name = f"127.0.0.1_{url.rsplit(':', 1)[1]}.key"
    inv = _attack(tmp_path, url, api_key_file=name)
    (inv.parent / name).write_text("tree-key\n")
    r = _cli("check", "-i", str(inv))
    assert (f"credentials: powerdns zone example.org: API key from {inv.parent / name}, "
            f"sent to {url}") in r.output, r.output
    assert _cli("dns", "plan", "-i", str(inv)).exit_code == 0
    assert seen.seen and {k for _, _, k in seen.seen} == {"tree-key"}

    seen.seen.clear()
    monkeypatch.setenv(KEY_ENV, "env-key")
    monkeypatch.setenv(URL_ENV, url + "/")  # the same server, written another way
    inv = _attack(tmp_path, url)
    r = _cli("check", "-i", str(inv), "--json")
    assert json.loads(r.output)["credentials"] == [{
        "provider": "powerdns", "zone": "example.org", "what": "API key",
        "source": f"${KEY_ENV} (for {url}, as ${URL_ENV} says)", "goes": f"sent to {url}",
        "line": f"powerdns zone example.org: API key from ${KEY_ENV} (for {url}, as "
                f"${URL_ENV} says), sent to {url}"}]
    assert _cli("dns", "plan", "-i", str(inv)).exit_code == 0
    assert seen.seen and {k for _, _, k in seen.seen} == {"env-key"}


def test_a_key_file_swapped_for_a_symlink_after_loading_is_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second check, on the file opened: the key file named for the server was a
    regular file in the tree when the inventory was loaded, and became a link to
    ~/.aws/credentials before it was read."""
    from provision.dns.providers import powerdns
    from provision.inventory import load_inventory

    home = _home(tmp_path, monkeypatch)
    inv_path = _attack(tmp_path, "http://127.0.0.1:9", api_key_file="127.0.0.1_9.key")
    key = inv_path.parent / "127.0.0.1_9.key"
    key.write_text("tree-key\n")
    inv = load_inventory(inv_path)
    assert inv.dns is not None
    key.unlink()
    key.symlink_to(home / ".aws" / "credentials")
    from provision.errors import UsageError

    with pytest.raises(UsageError, match=r"cannot use the api_key_file .*its real path "
                                         r".*/\.aws/credentials is outside"):
        powerdns.make(inv.dns.zones[0], inv)
