"""`provision dns migrate` pieces that need neither a provider nor the lab: name lookup,
value validation, and `provision check`'s offline warning about a migration left open."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from provision.dns.migrate import journal, trust
from provision.dns.migrate.run import find_zone, validate_values
from provision.errors import UsageError
from provision.inventory import load_inventory


def _inv(tmp_path: Path, zones: dict[str, object]) -> Path:
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, "dns": {"zones": zones}}))
    return p


def test_names_are_found_in_the_longest_zone(tmp_path: Path) -> None:
    z = {"provider": "rfc2136", "server": "127.0.0.1", "tsig_key_file": "tsig.key", "records": {}}
    inv = load_inventory(_inv(tmp_path, {"example.org": z, "sub.example.org": z}))
    assert find_zone(inv, "api.sub.example.org.")[0].name == "sub.example.org"
    assert find_zone(inv, "API.example.org") == (inv.dns.zones[0], "api.example.org.")  # type: ignore[union-attr]
    for bad in ("api.example.net.", "api", "a b.example.org", ""):
        with pytest.raises(UsageError):
            find_zone(inv, bad)
    one = load_inventory(_inv(tmp_path, {"example.org": z}))
    assert find_zone(one, "api")[1] == "api.example.org."


def test_values_are_checked_against_the_record_type() -> None:
    assert validate_values("A", ["192.0.2.2", "192.0.2.1", "192.0.2.1"]) == ("192.0.2.1", "192.0.2.2")
    assert validate_values("AAAA", ["2001:db8:0::1"]) == ("2001:db8::1",)
    assert validate_values("CNAME", ["LB.example.org"]) == ("lb.example.org.",)
    for rtype, bad in (("A", "lb.example.org"), ("A", "2001:db8::1"), ("AAAA", "192.0.2.1"),
                       ("AAAA", "fe80::1%eth0"), ("CNAME", "a..b"), ("CNAME", "a b"), ("A", "1.2.3.4\n")):
        with pytest.raises(UsageError):
            validate_values(rtype, [bad])
    with pytest.raises(UsageError, match="exactly one target"):
        validate_values("CNAME", ["a.example.org", "b.example.org"])
    # a bare label is not made a top-level domain ('lb-2.')
    with pytest.raises(UsageError, match="a single label"):
        validate_values("CNAME", ["lb-2"])


def test_a_bare_label_with_several_zones_asks_for_the_full_name(tmp_path: Path) -> None:
    z = {"provider": "rfc2136", "server": "127.0.0.1", "tsig_key_file": "tsig.key", "records": {}}
    inv = load_inventory(_inv(tmp_path, {"example.org": z, "example.net": z}))
    with pytest.raises(UsageError, match=r"bare label .* give the full name"):
        find_zone(inv, "api")


def test_check_warns_offline_about_a_migration_open_for_more_than_a_day(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    state = tmp_path / "state"
    monkeypatch.setenv("PROVISION_STATE_DIR", str(state))
    (state / "migrations").mkdir(parents=True)
    old = journal.Journal(name="api.example.org.", type="A", zone="example.org.",
                          provider="route53", original_values=("192.0.2.1",), original_ttl=3600,
                          target_values=("192.0.2.2",), lower_ttl=60, phase="lowered",
                          started_at=time.time() - 3 * 86400, lowered_at=time.time() - 3 * 86400)
    fresh = journal.Journal(**{**old.__dict__, "name": "www.example.org.", "started_at": time.time()})
    for j in (old, fresh):
        (state / "migrations" / journal.file_name(j.name)).write_text(journal.to_json(j))
    example = Path(__file__).parents[2] / "inventories" / "example.yml"
    # --no-local-files: the example's key (~/.ssh/id_ed25519) is not on every test machine
    r = CliRunner().invoke(main, ["check", "-i", str(example), "--json", "--no-local-files"])
    assert r.exit_code == 0, r.output
    found = [f for f in json.loads(r.stdout)["findings"] if f["code"] == "dns-migration-open"]
    assert len(found) == 1 and "api.example.org." in found[0]["message"]
    assert "3.0 days" in found[0]["message"] and "rollback" in found[0]["fix"]


def test_journal_writes_are_atomic_and_archived_on_close(tmp_path: Path) -> None:
    from provision.dns.migrate.store import JournalStore

    store = JournalStore(tmp_path / "m")
    j = journal.Journal(name="api.example.org.", type="A", zone="example.org.", provider="rfc2136",
                        original_values=("192.0.2.1",), original_ttl=300,
                        target_values=("192.0.2.2",), lower_ttl=60, phase="lowering",
                        started_at=1.0)
    store.save(j)
    assert store.load(j.name) == j
    store.save(j.at("lowered", 2.0, lowered_at=2.0))
    loaded = store.load(j.name)
    assert loaded is not None and loaded.phase == "lowered"
    assert [p.name for p in (tmp_path / "m").iterdir() if p.name.endswith(".tmp")] == []
    dest = store.archive(loaded, "rolled back")
    assert store.load(j.name) is None and dest.parent.name == "closed"
    assert trust.from_json(dest.read_text()).history[-1][1] == "closed: rolled back"
    (tmp_path / "m" / "bad.example.org.json").write_text("{")
    with pytest.raises(UsageError.__mro__[1]):  # ProvisionError: a clear message, not a traceback
        store.load("bad.example.org.")


def test_health_from_names_a_host_or_bastion_of_the_inventory(tmp_path: Path) -> None:
    """`--health-from`: checked against the inventory before anything is read or sent
    (exit 2); the name printed escaped."""
    from provision.dns.migrate import health, health_from

    z = {"provider": "rfc2136", "server": "127.0.0.1", "tsig_key_file": "tsig.key", "records": {}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, "bastions": {"jump": {"address": "192.0.2.1"}},
                                 "hosts": {"gpu1": {"address": "10.0.0.5", "via": "jump"}},
                                 "dns": {"zones": {"example.org": z}}}))
    inv = load_inventory(p)
    tcp = [health.parse("tcp:8000")]
    assert health_from.source(inv, None, tcp) is None
    assert health_from.source(inv, "jump", tcp).name == "jump"  # type: ignore[union-attr]
    assert health_from.source(inv, "gpu1", tcp).address == "10.0.0.5"  # type: ignore[union-attr]
    with pytest.raises(UsageError, match=r"--health-from gpu2: no host or bastion of that "
                                         r"name in .*inv.yml \(hosts and bastions: gpu1, jump\)"):
        health_from.source(inv, "gpu2", tcp)
    with pytest.raises(UsageError, match=r"--health-from jump: there is no --health"):
        health_from.source(inv, "jump", [])
    with pytest.raises(UsageError) as e:
        health_from.source(inv, "x\x1b[2Jy", tcp)
    assert "\x1b" not in e.value.message
    r = CliRunner().invoke(main, ["dns", "migrate", "cutover", "api.example.org", "-i", str(p),
                                  "--health", "tcp:80", "--health-from", "nosuch"])
    assert r.exit_code == 2 and "--health-from nosuch: no host or bastion" in r.output


@pytest.mark.parametrize(("value", "why"), [
    ("127.0.0.1", "loopback"), ("::1", "loopback"), ("0.0.0.0", "unspecified"),
    ("::ffff:127.0.0.1", "loopback"), ("169.254.169.254", "link-local"),
    ("10.0.0.5", "gpu1's own address"), ("198.51.100.9", "gpu1's own address"),
    ("localhost.", "a name of the local host"), ("localhost.localdomain.", "local host"),
])
def test_health_from_refuses_a_value_the_via_host_would_answer_itself(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, why: str) -> None:
    """From HOST its sshd makes the connection: a value that lands on HOST itself is
    answered there (any account may listen on the port; its firewall is never crossed),
    so it is refused before anything connects."""
    from provision.dns.migrate import health, health_from

    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, "bastions": {"jump": {"address": "192.0.2.1"}},
                                 "hosts": {"gpu1": {"address": "10.0.0.5", "via": "jump",
                                                    "public_address": "198.51.100.9"}}}))
    inv = load_inventory(p)

    def no_connect(*a: object, **k: object) -> None:
        raise AssertionError("connected")

    monkeypatch.setattr(health_from, "connect", no_connect)
    said: list[str] = []
    with pytest.raises(UsageError, match=why):
        health_from.gate("api", [health.parse("tcp:8000")], [value], ["192.0.2.50"],
                         said.append, inv, inv.node("gpu1"))
    assert said == []
    # another host's address goes through to the connection
    with pytest.raises(AssertionError, match="connected"):
        health_from.gate("api", [health.parse("tcp:8000")], ["10.0.0.6"], ["192.0.2.50"],
                         said.append, inv, inv.node("gpu1"))
