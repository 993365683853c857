"""Ctrl-C during `dns apply`, sent to a real CLI process against the real PowerDNS server
(tests/support/powerdns_server.py) at a point the process is held at for sure (faults.py
`--hold-dir`: `dns-ZONE`, inside the zone's apply, before its change set is sent): the
zone in flight finishes, the next is not started, the recap says which, exit 130; a second
Ctrl-C leaves at once. What the server holds is read back."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.powerdns_server import KEY_ENV, URL_ENV, Pdns
from tests.support.sigint import Proc

_zones = iter(range(1_000_000))


@pytest.fixture
def two_zones(pdns: Pdns, tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """Two fresh zones on the server, and an inventory giving each one A record."""
    n = next(_zones)
    a, b = f"ia{n}.example.org", f"ib{n}.example.org"
    for z in (a, b):
        pdns.create_zone(z + ".")
    doc = {"version": 1, "dns": {"zones": {z: {
        "provider": "powerdns", "api_url": pdns.url, "dns_address": "127.0.0.1",
        "dns_port": pdns.dns_port,
        "records": {"api": {"type": "A", "values": ["127.0.0.10"], "ttl": 60}}} for z in (a, b)}}}
    inv = tmp_path / "inv.yml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    yield a, b, inv
    for z in (a, b):
        pdns.delete_zone(z + ".")


def _has_api(pdns: Pdns, zone: str) -> bool:
    return (f"api.{zone}.", "A") in pdns.rrsets(zone + ".")


def _apply(pdns: Pdns, inv: Path, hold: Path, *extra: str) -> Proc:
    return Proc(["--hold-dir", str(hold), "--", "dns", "apply", "--yes", "-i", str(inv),
                 "--timeout", "30", *extra], env={KEY_ENV: pdns.key, URL_ENV: pdns.url})


def test_first_ctrl_c_finishes_the_zone_in_flight_and_skips_the_rest(
        pdns: Pdns, two_zones: tuple[str, str, Path], tmp_path: Path) -> None:
    a, b, inv = two_zones
    hold = tmp_path / "hold"
    hold.mkdir()
    run = _apply(pdns, inv, hold)
    try:
        run.reach(hold / f"dns-{a}.reached")
        run.interrupt()
        line = run.said("stopping:")
        assert f"1 zone finishing ({a}:" in line and "1 zone not started" in line
        (hold / f"dns-{a}.go").touch()
        code, err, out = run.finish()
    finally:
        run.kill()
    assert code == 130, err
    assert f"{a}: applied 1 change" in out
    assert f"{b}: not applied (Ctrl-C)" in out
    assert f"interrupted (Ctrl-C): applied {a}; not applied {b}; run dns apply again" in err
    assert "Aborted!" not in err
    assert not (hold / f"dns-{b}.reached").exists()  # b's apply never started
    assert _has_api(pdns, a) and not _has_api(pdns, b)  # what the server really holds


def test_json_marks_the_interrupted_run_and_the_zone_not_started(
        pdns: Pdns, two_zones: tuple[str, str, Path], tmp_path: Path) -> None:
    import json

    a, b, inv = two_zones
    hold = tmp_path / "hold"
    hold.mkdir()
    run = _apply(pdns, inv, hold, "--json")
    try:
        run.reach(hold / f"dns-{a}.reached")
        run.interrupt()
        run.said("stopping:")
        (hold / f"dns-{a}.go").touch()
        code, err, out = run.finish()
    finally:
        run.kill()
    assert code == 130, err
    data = json.loads(out)
    assert data["interrupted"] is True
    by_zone = {z["zone"]: z for z in data["zones"]}
    assert by_zone[a]["applied"] and not by_zone[a]["not_started"]
    assert by_zone[b]["not_started"] and not by_zone[b]["applied"]


def test_second_ctrl_c_leaves_at_once_saying_the_change_set_is_whole_or_absent(
        pdns: Pdns, two_zones: tuple[str, str, Path], tmp_path: Path) -> None:
    a, b, inv = two_zones
    hold = tmp_path / "hold"
    hold.mkdir()
    run = _apply(pdns, inv, hold)
    try:
        run.reach(hold / f"dns-{a}.reached")
        run.interrupt()
        run.said("stopping:")
        run.interrupt()  # still held: never let go
        code, err, _ = run.finish()
    finally:
        run.kill()
    assert code == 130, err
    assert "leaving now; what may be half-way:" in err
    assert f"{a}: its change set is one atomic change" in err
    assert not _has_api(pdns, a) and not _has_api(pdns, b)  # held before the send


# --- dns migrate run ----------------------------------------------------------------------

def test_ctrl_c_in_migrate_run_stops_after_the_phase_and_names_the_commands(
        pdns: Pdns, two_zones: tuple[str, str, Path], tmp_path: Path) -> None:
    """Held once the journal records `lowered` (the lowered TTL served): Ctrl-C there ends
    the run before the cutover, naming the phase and the exact commands; the printed resume
    command then finishes the migration."""
    import shlex

    from click.testing import CliRunner

    from provision.cli import main

    a, _b, inv = two_zones
    api = f"api.{a}."
    pdns.set_rrset(a + ".", api, "A", 2, ["127.0.0.10"])
    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / "migrate-lowered.hold").touch()
    env = {KEY_ENV: pdns.key, URL_ENV: pdns.url, "PROVISION_STATE_DIR": str(tmp_path / "state")}
    run = Proc(["--hold-dir", str(hold), "--", "dns", "migrate", "run", f"api.{a}", "--to",
                "127.0.0.20", "--lower-ttl", "1", "--timeout", "30", "-i", str(inv)], env=env)
    try:
        run.reach(hold / "migrate-lowered.reached")
        run.interrupt()
        assert "no further phase starts" in run.said("stopping:")
        (hold / "migrate-lowered.go").touch()
        code, err, _ = run.finish()
    finally:
        run.kill()
    assert code == 130, err
    assert "interrupted (Ctrl-C): the migration of api is in phase lowered (journal " in err
    resume = f"provision dns migrate run api.{a} -i {shlex.quote(str(inv))}"
    assert f"resume:    {resume}" in err
    assert f"roll back: provision dns migrate rollback api.{a} -i {shlex.quote(str(inv))}" in err
    assert not (hold / "migrate-switching.reached").exists()  # no cutover began
    assert pdns.rrsets(a + ".")[(api, "A")] == (1, ["127.0.0.10"])  # lowered, not switched
    for k, v in env.items():
        os.environ[k] = v  # the printed command, run as printed (this process's env)
    try:
        r = CliRunner().invoke(main, shlex.split(resume)[1:])
    finally:
        for k in env:
            os.environ.pop(k, None)
    assert r.exit_code == 0, r.output
    assert pdns.rrsets(a + ".")[(api, "A")][1] == ["127.0.0.20"]
