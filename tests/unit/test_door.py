"""The door, pure: the HAProxy config for each combination (golden files), the key map,
the step's decisions over fixtures of facts, and the door fact's parser.

Regenerate the golden files after an intended change with:
    UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_door.py
and review the diff before committing it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from provision.door import paths
from provision.door import render as R
from provision.facts import Facts
from provision.facts import door as D
from provision.facts.files import FileFact
from provision.facts.packages import PackageFact
from provision.facts.spec import Rec
from provision.facts.units import UnitFact
from provision.inventory import load_inventory
from provision.inventory.model import Host, Inventory, Rate
from provision.steps.actions import InstallPackages, RetireUnit
from provision.steps.door import DoorStep
from provision.steps.door_script import DoorApply
from provision.steps.files import sha256
from provision.steps.script import build

GOLDEN = Path(__file__).parent.parent / "golden" / "door"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
KEY = "sha256:" + hashlib.sha256(b"alice-key").hexdigest()

HEAD = """version: 1
hosts:
  gpu1:
    address: 10.0.0.1
    ssh_from: [10.0.0.0/8]
    services:
"""
ZONE = """dns:
  zones:
    example.org: {provider: route53}
"""
API = """      api:
        port: 8000
        command: /opt/api/bin/serve --port {port}
        expose: {from: [0.0.0.0/0, "::/0"]}
"""
CASES = {
    "keys-default-limits": API + f"        https: {{name: api.example.org, keys: {{alice: '{KEY}'}}}}\n",
    "no-keys": API + "        https: {name: api.example.org}\n",
    "per-minute-burst": API + f"""        https:
          name: api.example.org
          port: 8443
          keys: {{alice: '{KEY}', ci-bot: 'sha256:{"0" * 64}'}}
          limits: {{per_key: 300/min, per_address: 600/min, burst: 30, connections: 8}}
""",
    "two-doors": API + f"        https: {{name: api.example.org, keys: {{alice: '{KEY}'}}}}\n"
    + API.replace("api:", "embed:").replace("8000", "8001")
    + "        https: {name: embed.example.org, port: 8443}\n",
}


def _inv(tmp_path: Path, body: str) -> Inventory:
    p = tmp_path / "inv.yml"
    p.write_text(HEAD + body + ZONE)
    return load_inventory(p)


@pytest.mark.parametrize("case", sorted(CASES))
def test_config_golden(tmp_path: Path, case: str) -> None:
    inv = _inv(tmp_path, CASES[case])
    host = inv.hosts[0]
    text = R.config(host) + "".join(f"\n# ---- {R.map_path(s)}\n{R.keys_map(s)}"
                                    for s in R.doors(host) if s.https and s.https.keys)
    golden = GOLDEN / f"{case}.cfg"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.read_text() == text, f"{case}: UPDATE_GOLDEN=1 to regenerate, then review"


def test_digest_line_is_the_digest_of_the_text_without_it(tmp_path: Path) -> None:
    host = _inv(tmp_path, CASES["keys-default-limits"]).hosts[0]
    text = R.config(host)
    d = R.config_digest(text)
    assert d is not None and len(d) == 32
    assert R.digest_of(text.replace(d, "-")) == d


def _c(rate: Rate, burst: int | None) -> tuple[int, int, int]:
    c = R.counter(rate, burst, "x")
    return c.limit, c.window_ms, c.retry


def test_counter_windows() -> None:
    assert _c(Rate(5, 1), None) == (5, 1000, 1)
    assert _c(Rate(2, 1), 6) == (6, 3000, 3)  # 6 at once, then 2 a second
    assert _c(Rate(100, 1), 6) == (100, 1000, 1)  # the burst never lowers a limit
    assert _c(Rate(300, 60), 30) == (300, 60000, 60)
    assert _c(Rate(10, 60), 30) == (30, 180000, 180)
    assert _c(Rate(1, 60), None) == (1, 60000, 60)


def test_keys_map_holds_digests_only(tmp_path: Path) -> None:
    host = _inv(tmp_path, CASES["keys-default-limits"]).hosts[0]
    (s,) = R.doors(host)
    assert R.keys_map(s).splitlines()[1:] == [f"{KEY[7:]} alice"]
    assert R.map_path(s).startswith(paths.DOOR_DIR + "/api.") and R.map_path(s).endswith(".keys")


# --- the step -----------------------------------------------------------------------------


def _step(tmp_path: Path, case: str = "keys-default-limits") -> tuple[DoorStep, Host]:
    inv = _inv(tmp_path, CASES[case])
    return DoorStep.build(inv, inv.hosts[0]), inv.hosts[0]


def _file(path: str, text: str | None, mode: int = 0o600) -> FileFact:
    if text is None:
        return FileFact(path, "absent")
    return FileFact(path, "file", sha256(text), mode, "root", "root", 0, text)


def _converged(host: Host, *, served: str | None = None, cert: bool = True,
               active: bool = True, installed: bool = True) -> Facts:
    config = R.config(host)
    digest = R.config_digest(config)
    files = {paths.CONFIG: _file(paths.CONFIG, config), paths.UNIT_FILE: _file(paths.UNIT_FILE, R.unit(), 0o644)}
    for s in R.doors(host):
        files[R.map_path(s)] = _file(R.map_path(s), R.keys_map(s))
    facts = Facts.of(files=files, units={paths.UNIT: UnitFact(
        paths.UNIT, "loaded", "enabled", "active" if active else "inactive", False, 1)},
        packages={"haproxy": PackageFact("haproxy", "install ok installed" if installed else "", "2.6")})
    names = [s.https.name for s in R.doors(host) if s.https]
    ports = [s.https.port for s in R.doors(host) if s.https]
    door = D.DoorFact({n: D.CertFact(n, "ab" * 32, 1, True, True, True) for n in names} if cert else {},
                      {p: D.ServedFact(p, served or digest, "ab" * 32) for p in ports})
    return Facts({**facts.values, "door": door})


def test_converged_door_is_a_no_op(tmp_path: Path) -> None:
    step, host = _step(tmp_path)
    assert step.diff(_converged(host)) == []


def test_fresh_host_installs_haproxy_and_makes_a_certificate(tmp_path: Path) -> None:
    step, host = _step(tmp_path)
    facts = Facts({**Facts.of().values, "door": D.DoorFact({}, {})})
    install, door = step.diff(facts)
    assert install == InstallPackages(("haproxy",), 300)
    assert isinstance(door, DoorApply)
    assert door.certs == ("api.example.org",) and door.ports == (443,) and door.unit_changed
    written = {p for p, _, _ in door.writes}
    assert written == {paths.UNIT_FILE, paths.CONFIG + ".new", R.map_path(host.services[0])}
    assert all(m == 0o600 for p, _, m in door.writes if p != paths.UNIT_FILE)


def test_port_serving_another_config_is_applied_again(tmp_path: Path) -> None:
    # the files are right but the reload never took (a worker that could not bind)
    step, host = _step(tmp_path)
    (door,) = step.diff(_converged(host, served="0" * 32))
    assert isinstance(door, DoorApply) and "port 443 does not serve this config" in door.why
    assert door.writes == ((paths.CONFIG + ".new", R.config(host), 0o600),)


def test_revoked_key_writes_a_new_map_and_removes_the_old(tmp_path: Path) -> None:
    _, host = _step(tmp_path, "per-minute-burst")
    facts = _converged(host)
    inv = _inv(tmp_path, CASES["per-minute-burst"].replace(", ci-bot: 'sha256:" + "0" * 64 + "'", ""))
    fewer = DoorStep.build(inv, inv.hosts[0])
    (door,) = fewer.diff(facts)
    assert isinstance(door, DoorApply)
    assert door.remove == (R.map_path(host.services[0]),)
    new_map = R.map_path(inv.hosts[0].services[0])
    assert (new_map, R.keys_map(inv.hosts[0].services[0]), 0o600) in door.writes


def test_missing_certificate_files_are_made(tmp_path: Path) -> None:
    step, host = _step(tmp_path)
    (door,) = step.diff(_converged(host, cert=False))
    assert isinstance(door, DoorApply) and door.certs == ("api.example.org",)


def test_host_without_a_door_retires_a_running_one(tmp_path: Path) -> None:
    inv = _inv(tmp_path, API.replace("expose: {from: [0.0.0.0/0, \"::/0\"]}", "expose: tunnel"))
    step = DoorStep.build(inv, inv.hosts[0])
    facts = Facts.of(units={paths.UNIT: UnitFact(paths.UNIT, "loaded", "enabled", "active", False, 1)})
    assert step.diff(facts) == [RetireUnit(paths.UNIT, "no service of this host has a door")]
    assert step.diff(Facts.of()) == []


def test_a_stopped_static_door_unit_is_left_alone(tmp_path: Path) -> None:
    """A unit named like the door's without an [Install] section (written by hand) is
    `static`: `disable --now` stops it and cannot disable it, so once it is stopped there
    is nothing to retire; planning it again made every apply change something."""
    inv = _inv(tmp_path, API.replace("expose: {from: [0.0.0.0/0, \"::/0\"]}", "expose: tunnel"))
    step = DoorStep.build(inv, inv.hosts[0])

    def unit(state: str, active: str) -> Facts:
        return Facts.of(units={paths.UNIT: UnitFact(paths.UNIT, "loaded", state, active, False, 1)})

    assert step.diff(unit("static", "active")) == [
        RetireUnit(paths.UNIT, "no service of this host has a door")]
    assert step.diff(unit("static", "inactive")) == []
    assert step.diff(unit("disabled", "inactive")) == []
    assert step.diff(unit("enabled-runtime", "inactive")) == [
        RetireUnit(paths.UNIT, "no service of this host has a door")]


def test_batch_checks_before_it_replaces_and_reads_back(tmp_path: Path) -> None:
    step, host = _step(tmp_path)
    actions = step.diff(Facts({**Facts.of().values, "door": D.DoorFact({}, {})}))
    script = build(actions)
    i_cert = script.index("provision_door_cert api.example.org")
    i_write = script.index("/etc/provision/door/haproxy.cfg.new")
    i_apply = script.index(f"provision_door_apply {R.config_digest(R.config(host))} 1 443")
    assert i_cert < i_write < i_apply
    assert "haproxy -c -q -f" in script and "HAProxy refused the new config" in script
    assert hashlib.sha256(b"alice-key").hexdigest() not in script.split("provision_apply()")[0]


# --- the fact -----------------------------------------------------------------------------


def test_door_fact_parses_and_refuses_junk() -> None:
    recs = [Rec(1, "door", ("cert", "api.example.org", "AB" * 32, "1767225600", "1", "1", "1"), ""),
            Rec(2, "door", ("served", "443", "0123456789abcdef0123456789abcdef", "-"), ""),
            Rec(3, "door", ("cert", "../etc", "AB" * 32, "1", "0", "1", "1"), ""),
            Rec(4, "door", ("served", "99999", "x", "-"), "")]
    fact = D.parse(recs)
    assert fact.certs == {"api.example.org": D.CertFact("api.example.org", "ab" * 32, 1767225600,
                                                        True, True, True)}
    assert fact.served == {443: D.ServedFact(443, "0123456789abcdef0123456789abcdef", None)}


# --- provision keys -----------------------------------------------------------------------


def test_keys_new_shows_the_key_once_and_its_hash_matches() -> None:
    import json

    from click.testing import CliRunner

    from provision.cli import main
    from provision.inventory.https import check_digest

    example = str(Path(__file__).parents[2] / "inventories" / "example.yml")
    r = CliRunner().invoke(main, ["keys", "new", "model-api", "carol", "-i", example, "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["hash"] == "sha256:" + hashlib.sha256(out["key"].encode()).hexdigest()
    assert check_digest(out["hash"]) == out["hash"] and out["key"].startswith("pk-")
    assert out["fields"] == ["hosts.gpu1.services.model-api.https.keys"] and out["replaces"] == []
    r = CliRunner().invoke(main, ["keys", "new", "model-api", "alice", "-i", example, "--json"])
    assert json.loads(r.output)["replaces"] == ["hosts.gpu1.services.model-api.https.keys"]
    r = CliRunner().invoke(main, ["keys", "new", "jupyter", "carol", "-i", example])
    assert r.exit_code == 2 and "with https:" in r.output
    r = CliRunner().invoke(main, ["keys", "new", "model-api", "a b", "-i", example])
    assert r.exit_code == 2
    r = CliRunner().invoke(main, ["keys", "hash"], input="pk-abc\n")
    assert r.output == "sha256:" + hashlib.sha256(b"pk-abc").hexdigest() + "\n"
