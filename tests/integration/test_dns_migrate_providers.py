"""`provision dns migrate` on Cloud DNS (the local v1 server, changes `pending` for a few
polls) and Route53 (moto on 127.0.0.1, GetChange held PENDING for a few polls): the same
phase machine as on BIND; bad input; another machine's view; crashes at every boundary.

Record values are 127.0.0.x only: nothing is ever sent to any other address."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from tests.support.clouddns_fake import FakeCloudDns, isolated_fake
from tests.support.moto_server import aws_test_env, moto_server, reset

PROJECT, MZ, ZONE = "lab-project", "example-org", "example.org."
API = "api.example.org."
MARKER = "_provision-migration.api.example.org."
CLOSED = "_provision-closed-a.api.example.org."     # api A's closed record
FAULTS = Path(__file__).parents[1] / "support" / "faults.py"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloudDns]:
    with isolated_fake(monkeypatch, PROJECT, MZ, ZONE, page_size=50, pending_polls=2) as f:
        f.set_rrset(PROJECT, MZ, API, "A", 2, ["127.0.0.1"])
        f.set_rrset(PROJECT, MZ, "www.example.org.", "CNAME", 2, ["a.example.org."])
        yield f


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv("PROVISION_STATE_DIR", str(d))
    return d


def _inv(tmp_path: Path, fake: FakeCloudDns) -> Path:
    doc = {"version": 1, "dns": {"zones": {"example.org": {
        "provider": "clouddns", "project": PROJECT, "managed_zone": MZ, "endpoint": fake.url,
        "records": {}}}}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    return p


class Clock:
    """`time` as provision.dns.migrate.run sees it: a wall clock that stands still until
    the test moves it (everything else, monotonic and sleep among it, the real module's).
    What a TTL allows then depends on the test, never on how busy the machine is."""

    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    from provision.dns.migrate import run

    c = Clock()
    monkeypatch.setattr(run, "time", c)
    return c


def _cli(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, list(args), env=env)


def _json(r: Any) -> Any:
    assert r.stdout, r.output
    return json.loads(r.stdout)


def _journals(state: Path) -> list[Path]:
    return sorted((state / "migrations").glob("*.json")) if (state / "migrations").exists() else []


def _open_marker(sets: dict[Any, Any]) -> bool:
    """An open migration's marker is in the zone (a closed migration's record is not one)."""
    m = sets.get((MARKER, "TXT"))
    return m is not None and '"phase=closed"' not in m["rrdatas"]


def _posts(fake: FakeCloudDns) -> int:
    return sum(1 for m, _ in fake.requests if m == "POST")


# --- Cloud DNS: every phase by hand -------------------------------------------------------

def test_clouddns_phase_by_phase_with_pending_changes(fake: FakeCloudDns, state: Path,
                                                      tmp_path: Path, clock: Clock) -> None:
    inv = str(_inv(tmp_path, fake))
    before = dict(fake.rrsets(PROJECT, MZ)[(API, "A")])
    r = _cli("dns", "migrate", "start", API, "--to", "127.0.0.2", "--lower-ttl", "1", "-i", inv, "--json")
    assert r.exit_code == 0, r.output
    sets = fake.rrsets(PROJECT, MZ)
    assert sets[(API, "A")]["ttl"] == 1 and sets[(API, "A")]["rrdatas"] == ["127.0.0.1"]
    assert '"phase=lowered"' in sets[(MARKER, "TXT")]["rrdatas"]
    polls = [p for m, p in fake.requests if m == "GET" and "/changes/1" in p]
    assert len(polls) == 3  # pending, pending, done
    assert len(_journals(state)) == 1

    [s] = _json(_cli("dns", "migrate", "status", API, "-i", inv, "--json"))
    assert s["phase"] == "lowered" and s["original"] == {"values": ["127.0.0.1"], "ttl": 2}
    assert s["seconds_left"] == 2  # the clock stood still since the lowered TTL was served
    assert any("not asked: no address" in n for n in s["notes"])  # never the real Google servers

    r = _cli("dns", "migrate", "start", API, "--to", "127.0.0.3", "-i", inv)
    assert r.exit_code == 2 and "already open" in r.output
    r = _cli("dns", "migrate", "cutover", API, "-i", inv)
    assert r.exit_code == 2 and "cutover refused" in r.output and "--force" in r.output
    assert fake.rrsets(PROJECT, MZ)[(API, "A")]["rrdatas"] == ["127.0.0.1"]
    clock.now += 2.1  # the original TTL (2 s) has run out since the lowered one was served
    r = _cli("dns", "migrate", "cutover", API, "-i", inv, "--json")
    assert r.exit_code == 0, r.output
    assert fake.rrsets(PROJECT, MZ)[(API, "A")] == {**before, "ttl": 1, "rrdatas": ["127.0.0.2"]}
    assert '"phase=switched"' in fake.rrsets(PROJECT, MZ)[(MARKER, "TXT")]["rrdatas"]
    r = _cli("dns", "migrate", "verify", API, "-i", inv, "--json")
    assert r.exit_code == 0 and _json(r)["ok"], r.output
    r = _cli("dns", "migrate", "finalize", API, "-i", inv, "--ttl", "600", "--json")
    assert r.exit_code == 0, r.output
    sets = fake.rrsets(PROJECT, MZ)
    assert sets[(API, "A")]["ttl"] == 600 and sets[(API, "A")]["rrdatas"] == ["127.0.0.2"]
    assert (MARKER, "TXT") not in sets
    closed = sets[(CLOSED, "TXT")]["rrdatas"]  # the migration's closed record stays
    assert '"phase=closed"' in closed and '"from=127.0.0.1"' in closed, closed
    assert '"to=127.0.0.2"' in closed and any(v.startswith('"by=') for v in closed), closed
    assert _json(_cli("dns", "migrate", "status", "-i", inv, "--json")) == []
    assert _journals(state) == [] and len(list((state / "migrations" / "closed").glob("*.json"))) == 1


def test_clouddns_cname_target_change_works_like_an_a_change(fake: FakeCloudDns, state: Path,
                                                             tmp_path: Path) -> None:
    inv = str(_inv(tmp_path, fake))
    r = _cli("dns", "migrate", "run", "www.example.org", "--to", "b.example.org", "--lower-ttl", "1",
             "-i", inv, "--json")
    assert r.exit_code == 0, r.output
    assert fake.rrsets(PROJECT, MZ)[("www.example.org.", "CNAME")]["rrdatas"] == ["b.example.org."]
    assert fake.rrsets(PROJECT, MZ)[("www.example.org.", "CNAME")]["ttl"] == 2
    assert set(_json(r)["timings"]) == {"lowered", "switched", "verified", "finalized"}


def test_a_teammate_sees_and_rolls_back_from_the_zone_marker(fake: FakeCloudDns, state: Path,
                                                             tmp_path: Path) -> None:
    inv = str(_inv(tmp_path, fake))
    before = dict(fake.rrsets(PROJECT, MZ)[(API, "A")])
    assert _cli("dns", "migrate", "start", API, "--to", "127.0.0.2", "-i", inv).exit_code == 0
    [mine] = _json(_cli("dns", "migrate", "status", "-i", inv, "--json"))
    assert mine["mine"] is True and "@" in mine["by"]
    other = {"PROVISION_STATE_DIR": str(tmp_path / "teammate"), "USER": "bob"}
    [s] = _json(_cli("dns", "migrate", "status", "-i", inv, "--json", env=other))
    assert s["source"] == "marker" and s["phase"] == "lowered"
    assert s["by"] == mine["by"] and s["mine"] is False  # listed with their name
    text = _cli("dns", "migrate", "status", "-i", inv, env=other).output
    assert f"opened by {mine['by']} (someone else)" in text, text
    assert s["original"] == {"values": ["127.0.0.1"], "ttl": 2}
    r = _cli("dns", "migrate", "start", API, "--to", "127.0.0.5", "-i", inv, env=other)
    assert r.exit_code == 2 and "already open" in r.output
    r = _cli("dns", "migrate", "rollback", API, "-i", inv, "--json", env=other)
    assert r.exit_code == 0, r.output
    assert fake.rrsets(PROJECT, MZ)[(API, "A")] == before
    assert (MARKER, "TXT") not in fake.rrsets(PROJECT, MZ)
    # back on the first machine: the journal is closed from what the zone says
    r = _cli("dns", "migrate", "status", "-i", inv, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout) == [], r.output
    assert _journals(state) == []


def test_dns_apply_leaves_the_migrating_record_alone(fake: FakeCloudDns, state: Path,
                                                     tmp_path: Path) -> None:
    doc = yaml.safe_load(_inv(tmp_path, fake).read_text())
    doc["dns"]["zones"]["example.org"]["records"] = {"api": {"type": "A", "values": ["127.0.0.1"], "ttl": 2}}
    inv = tmp_path / "declared.yml"
    inv.write_text(yaml.safe_dump(doc))
    assert _cli("dns", "migrate", "start", API, "--to", "127.0.0.2", "--lower-ttl", "1",
                "-i", str(inv)).exit_code == 0
    r = _cli("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert r.exit_code == 0 and "migration is open" in r.output, r.output


# --- bad input: exit 2, journal and zone untouched ----------------------------------------

@pytest.mark.parametrize("args, message", [
    (["api.example.net.", "--to", "127.0.0.2"], "in none of the inventory's zones"),
    (["nothere.example.org.", "--to", "127.0.0.2"], "has no A, AAAA or CNAME record"),
    ([API, "--to", "lb.example.org"], "not an IPv4 address"),
    ([API, "--to", "::1"], "not an IPv4 address"),
    ([API, "--to", "127.0.0.2", "--lower-ttl", "0"], "--lower-ttl"),
    ([API, "--to", "127.0.0.1"], "already holds"),
])
def test_bad_input_is_exit_2_and_touches_nothing(fake: FakeCloudDns, state: Path, tmp_path: Path,
                                                 args: list[str], message: str) -> None:
    inv = str(_inv(tmp_path, fake))
    before = {k: dict(v) for k, v in fake.rrsets(PROJECT, MZ).items()}
    r = _cli("dns", "migrate", "start", *args, "-i", inv)
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output
    assert _journals(state) == []
    assert _posts(fake) == 0 and fake.rrsets(PROJECT, MZ) == before


def test_bad_health_spec_and_no_migration_are_exit_2(fake: FakeCloudDns, state: Path,
                                                     tmp_path: Path) -> None:
    inv = str(_inv(tmp_path, fake))
    r = _cli("dns", "migrate", "cutover", API, "--health", "udp:53", "-i", inv)
    assert r.exit_code == 2 and "expected tcp:PORT" in r.output
    for cmd in ("cutover", "verify", "finalize", "rollback"):
        r = _cli("dns", "migrate", cmd, API, "-i", inv)
        assert r.exit_code == 2 and "no open migration" in r.output, (cmd, r.output)
    assert _posts(fake) == 0


# --- crashes at every boundary (SIGKILL through tests/support/faults.py) -------------------

def _faulty(fault: list[str], args: list[str], state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PROVISION_STATE_DIR": str(state)}
    return subprocess.run([sys.executable, str(FAULTS), *fault, "--", *args], env=env,
                          capture_output=True, text=True, timeout=120)


RUN = ["dns", "migrate", "run", API, "--to", "127.0.0.2", "--lower-ttl", "1"]


@pytest.mark.parametrize("fault, command, phase_after", [
    (["--kill-after-phase", "lowering"], RUN, None),          # intent written, change not made
    (["--kill-after-change", "1"], RUN, "lowered"),           # lowered in the zone, not journalled
    (["--kill-after-phase", "lowered"], RUN, "lowered"),
    (["--kill-after-phase", "switching"], RUN, "lowered"),
    (["--kill-after-change", "2"], RUN, "switched"),          # switched in the zone, not journalled
    (["--kill-after-phase", "switched"], RUN, "switched"),
    (["--kill-after-phase", "verified"], RUN, "verified"),
    (["--kill-after-phase", "finalizing"], RUN, "verified"),
    (["--kill-after-change", "3"], RUN, None),                # finalized in the zone, not journalled
])
@pytest.mark.parametrize("then", ["complete", "rollback"])
def test_crash_then_status_tells_the_truth_and_the_next_command_finishes(
        fake: FakeCloudDns, tmp_path: Path, fault: list[str], command: list[str],
        phase_after: str | None, then: str) -> None:
    state = tmp_path / "state"
    inv = str(_inv(tmp_path, fake))
    before = dict(fake.rrsets(PROJECT, MZ)[(API, "A")])
    r = _faulty(fault, [*command, "-i", inv], state)
    assert r.returncode == -9, (r.returncode, r.stdout, r.stderr)
    env = {"PROVISION_STATE_DIR": str(state)}
    r = _cli("dns", "migrate", "status", "-i", inv, "--json", env=env)
    assert r.exit_code == 0, r.output
    listed = json.loads(r.stdout)
    sets = fake.rrsets(PROJECT, MZ)
    if phase_after is None:
        assert listed == []
        assert not _open_marker(sets)
    else:
        [s] = listed
        assert s["phase"] == phase_after and not s["conflict"], s
        marker = sets[(MARKER, "TXT")]["rrdatas"]
        zone_phase = "lowered" if phase_after == "lowered" else "switched"
        assert f'"phase={zone_phase}"' in marker
        want = "127.0.0.1" if phase_after == "lowered" else "127.0.0.2"
        assert s["zone_now"].startswith(want)
    finalized = sets[(API, "A")]["rrdatas"] == ["127.0.0.2"] and not _open_marker(sets)
    if then == "complete":
        r = _cli("dns", "migrate", "run", API, "--to", "127.0.0.2", "--lower-ttl", "1", "-i", inv,
                 env=env) if not finalized else None
        if r is not None:
            assert r.exit_code == 0, r.output
        got = fake.rrsets(PROJECT, MZ)[(API, "A")]
        assert got["rrdatas"] == ["127.0.0.2"] and got["ttl"] == 2
    else:
        r = _cli("dns", "migrate", "rollback", API, "-i", inv, env=env)
        if phase_after is None and not finalized:
            assert r.exit_code == 2 and "no open migration" in r.output, r.output
        elif finalized:
            assert r.exit_code == 2, r.output   # closed: nothing to roll back
        else:
            assert r.exit_code == 0, r.output
        if not finalized:
            assert fake.rrsets(PROJECT, MZ)[(API, "A")] == before  # byte-identical
    assert not _open_marker(fake.rrsets(PROJECT, MZ))
    assert json.loads(_cli("dns", "migrate", "status", "-i", inv, "--json", env=env).stdout) == []
    assert _journals(state) == []


def test_crash_during_rollback_then_rollback_again(fake: FakeCloudDns, tmp_path: Path) -> None:
    state = tmp_path / "state"
    inv = str(_inv(tmp_path, fake))
    env = {"PROVISION_STATE_DIR": str(state)}
    before = dict(fake.rrsets(PROJECT, MZ)[(API, "A")])
    assert _cli("dns", "migrate", "start", API, "--to", "127.0.0.2", "-i", inv, env=env).exit_code == 0
    r = _faulty(["--kill-after-phase", "rolling-back"], ["dns", "migrate", "rollback", API, "-i", inv], state)
    assert r.returncode == -9
    [s] = json.loads(_cli("dns", "migrate", "status", "-i", inv, "--json", env=env).stdout)
    assert s["phase"] == "rolling-back" and any("rollback again" in n for n in s["notes"])
    r = _faulty(["--kill-after-change", "1"], ["dns", "migrate", "rollback", API, "-i", inv], state)
    assert r.returncode == -9
    assert fake.rrsets(PROJECT, MZ)[(API, "A")] == before
    assert json.loads(_cli("dns", "migrate", "status", "-i", inv, "--json", env=env).stdout) == []
    assert _journals(state) == []


# --- Route53 (moto) -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def r53(moto_url: str, monkeypatch: pytest.MonkeyPatch, state: Path) -> Iterator[dict[str, Any]]:
    import boto3

    reset(moto_url)
    for k, v in aws_test_env(moto_url).items():
        if v is None:
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, v)
    client = boto3.client("route53", endpoint_url=moto_url, region_name="us-east-1")
    zid = client.create_hosted_zone(Name=ZONE, CallerReference="t")["HostedZone"]["Id"]
    client.change_resource_record_sets(HostedZoneId=zid, ChangeBatch={"Changes": [
        # UPSERT, and a different lowered TTL per migration below: moto 5 refuses a CREATE
        # identical to one in the zone's change history even when the same batch deletes
        # the record first (real Route53 applies the batch)
        {"Action": "UPSERT", "ResourceRecordSet": {"Name": API, "Type": "A", "TTL": 3,
                                                   "ResourceRecords": [{"Value": "127.0.0.1"}]}},
        {"Action": "CREATE", "ResourceRecordSet": {"Name": "target.example.org.", "Type": "A", "TTL": 300,
                                                   "ResourceRecords": [{"Value": "127.0.0.9"}]}},
        {"Action": "CREATE", "ResourceRecordSet": {"Name": "lb.example.org.", "Type": "A", "AliasTarget": {
            "HostedZoneId": zid.rsplit("/", 1)[-1], "DNSName": "target.example.org.",
            "EvaluateTargetHealth": False}}}]})
    polls: list[list[str]] = []   # per change (moto reuses one change id): statuses seen

    def changed(**kw: Any) -> None:
        polls.append([])

    def pending(http_response: Any, parsed: dict[str, Any], model: Any, **kw: Any) -> None:
        info = parsed.get("ChangeInfo", {})
        if len(polls[-1]) < 2:
            info["Status"] = "PENDING"
        polls[-1].append(info.get("Status", "?"))

    # each change stays PENDING for two polls (moto answers INSYNC at once)
    client.meta.events.register("after-call.route53.ChangeResourceRecordSets", changed)
    client.meta.events.register("after-call.route53.GetChange", pending)
    from provision.dns.migrate import run as migrate_run
    from provision.dns.providers.route53 import Route53Provider

    monkeypatch.setattr(migrate_run, "make_provider", lambda zone, inv: Route53Provider(
        zone.name, endpoint_url=moto_url, client=client, wait_delay=0.05))
    doc = {"version": 1, "aws": {"region": "us-east-1", "endpoint_url": moto_url},
           "dns": {"zones": {"example.org": {"provider": "route53", "records": {}}}}}
    inv = state.parent / "r53.yml"
    inv.write_text(yaml.safe_dump(doc))
    yield {"client": client, "zone_id": zid, "polls": polls, "inv": str(inv)}


def _r53_get(r53: dict[str, Any], name: str, rtype: str = "A") -> dict[str, Any] | None:
    page = r53["client"].list_resource_record_sets(HostedZoneId=r53["zone_id"], StartRecordName=name,
                                                   StartRecordType=rtype, MaxItems="1")
    rr = page["ResourceRecordSets"]
    return rr[0] if rr and rr[0]["Name"] == name and rr[0]["Type"] == rtype else None


def test_route53_run_waits_out_pending_changes(r53: dict[str, Any], state: Path) -> None:
    before = _r53_get(r53, API)
    r = _cli("dns", "migrate", "start", API, "--to", "127.0.0.2", "--lower-ttl", "1", "-i", r53["inv"])
    assert r.exit_code == 0, r.output
    got = _r53_get(r53, API)
    assert got is not None and got["TTL"] == 1
    assert _r53_get(r53, MARKER, "TXT") is not None
    assert r53["polls"] == [["PENDING", "PENDING", "INSYNC"]]
    r = _cli("dns", "migrate", "rollback", API, "-i", r53["inv"])
    assert r.exit_code == 0, r.output
    assert _r53_get(r53, API) == before and _r53_get(r53, MARKER, "TXT") is None
    r = _cli("dns", "migrate", "run", API, "--to", "127.0.0.2", "--lower-ttl", "2", "-i", r53["inv"],
             "--json")
    assert r.exit_code == 0, r.output
    got = _r53_get(r53, API)
    assert got is not None and got["TTL"] == 3 and got["ResourceRecords"] == [{"Value": "127.0.0.2"}]
    assert _r53_get(r53, MARKER, "TXT") is None
    closed = _r53_get(r53, CLOSED, "TXT")  # the migration's closed record, written with it
    assert closed is not None and {"Value": '"phase=closed"'} in closed["ResourceRecords"]
    # lower, rollback, then run: lower, switch, finalize — each waited out two PENDING polls
    assert r53["polls"] == [["PENDING", "PENDING", "INSYNC"]] * 5
    assert _json(_cli("dns", "migrate", "status", "-i", r53["inv"], "--json")) == []


def test_route53_alias_has_no_ttl_to_lower(r53: dict[str, Any], state: Path) -> None:
    r = _cli("dns", "migrate", "start", "lb.example.org.", "--to", "127.0.0.2", "-i", r53["inv"])
    assert r.exit_code == 2, r.output
    assert "alias" in r.output and "no TTL of its own" in r.output
    assert "migrate start target.example.org." in r.output
    assert _journals(state) == []


def test_a_record_changed_behind_the_migration_is_a_conflict_only_rollback_resolves(
        fake: FakeCloudDns, state: Path, tmp_path: Path) -> None:
    inv = str(_inv(tmp_path, fake))
    before = dict(fake.rrsets(PROJECT, MZ)[(API, "A")])
    assert _cli("dns", "migrate", "start", API, "--to", "127.0.0.2", "--lower-ttl", "1",
                "-i", inv).exit_code == 0
    fake.set_rrset(PROJECT, MZ, API, "A", 1, ["127.0.0.7"])  # someone else, by hand
    r = _cli("dns", "migrate", "status", API, "-i", inv, "--json")
    assert r.exit_code == 1, r.output
    [s] = json.loads(r.stdout)
    assert "changed outside this migration" in s["conflict"] and "127.0.0.7" in s["conflict"]
    assert s["next"] == "provision dns migrate rollback api"
    posts = _posts(fake)
    for cmd in (["cutover", API, "--force"], ["finalize", API]):
        r = _cli("dns", "migrate", *cmd, "-i", inv)
        assert r.exit_code == 1 and "changed outside this migration" in r.output, r.output
    assert _posts(fake) == posts
    r = _cli("dns", "migrate", "rollback", API, "-i", inv)
    assert r.exit_code == 0, r.output
    assert fake.rrsets(PROJECT, MZ)[(API, "A")] == before
    assert _journals(state) == []


def test_run_stops_at_a_failing_health_check_and_resumes(fake: FakeCloudDns, state: Path,
                                                        tmp_path: Path) -> None:
    import socket

    inv = str(_inv(tmp_path, fake))
    srv = socket.socket()
    srv.bind(("127.0.0.2", 0))  # the new value; nothing listens yet
    port = srv.getsockname()[1]
    r = _cli("dns", "migrate", "run", API, "--to", "127.0.0.2", "--lower-ttl", "1",
             "--health", f"tcp:{port}", "-i", inv)
    assert r.exit_code == 1 and "health check failed" in r.output, r.output
    assert fake.rrsets(PROJECT, MZ)[(API, "A")]["rrdatas"] == ["127.0.0.1"]
    [s] = _json(_cli("dns", "migrate", "status", API, "-i", inv, "--json"))
    assert s["phase"] == "lowered"
    srv.listen()
    try:
        r = _cli("dns", "migrate", "run", API, "--to", "127.0.0.2", "--lower-ttl", "1",
                 "--health", f"tcp:{port}", "-i", inv)
        assert r.exit_code == 0, r.output
        assert "resuming the open migration (phase lowered)" in r.output
    finally:
        srv.close()
    got = fake.rrsets(PROJECT, MZ)[(API, "A")]
    assert got["rrdatas"] == ["127.0.0.2"] and got["ttl"] == 2
