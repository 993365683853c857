"""A unit that cannot start says why, in the recap and in `--json`: systemd's result and
the last lines of the unit's journal (lab: a real systemd on gpu1).

The service's command (`ls` of a missing file) writes the path to stderr and exits 2; `systemctl start` of a
`Type=simple` unit succeeds anyway, so this also checks the settle check after the starts.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import PROVISION, Lab, one_host_inventory

pytestmark = pytest.mark.lab

HOST = "gpu1"
SERVICE = "brokenapp"
UNIT = f"provision-{SERVICE}.service"
MARKER = "/srv/brokenapp-model-file-that-is-missing"


@pytest.fixture(scope="module")
def broken(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    d = tmp_path_factory.mktemp("unit-failure")
    doc = yaml.safe_load(lab.inventory.read_text())
    doc["hosts"] = {HOST: {"address": doc["hosts"][HOST]["address"], "via": "bastion",
                           "services": {SERVICE: {
                               "port": 8123, "restart": False,
                               "command": f"/bin/ls {MARKER}"}}}}
    for key in ("roles", "dns", "clusters"):
        doc.pop(key, None)
    inventory = d / "inventory.yml"
    inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
    playbook = d / "services.yml"
    playbook.write_text(f"hosts: [{HOST}]\nsteps: [services]\n")
    yield {"inventory": inventory, "playbook": playbook}
    lab.host(HOST, "systemctl", "disable", "--now", UNIT, check=False)
    lab.host(HOST, "rm", "-f", f"/etc/systemd/system/{UNIT}", check=False)
    lab.host(HOST, "systemctl", "daemon-reload", check=False)
    lab.host(HOST, "systemctl", "reset-failed", check=False)


def test_the_journal_of_a_unit_that_cannot_start_is_in_the_recap(
        lab: Lab, broken: dict[str, Path]) -> None:
    args = ("apply", "--yes", "-i", str(broken["inventory"]), "--playbook", str(broken["playbook"]))
    code, data, err = lab.provision_json(*args)
    assert code == 1, err + json.dumps(data, indent=1)
    (host,) = [h for h in data["hosts"] if h["host"] == HOST]
    assert host["status"] == "failed"
    f: dict[str, Any] = host["unit_failure"]
    assert f["unit"] == UNIT and f["result"] == "exit-code" and f["exec_main_status"] == "2"
    assert any(MARKER in line for line in f["journal"]), f["journal"]
    assert MARKER in host["error"] and UNIT in host["error"]
    # the human recap (not --json) carries the same reason
    r = subprocess.run(["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, *args],
                       capture_output=True, text=True, timeout=240,
                       env={"COLUMNS": "400", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    assert r.returncode == 1
    assert MARKER in r.stdout and "exit-code" in r.stdout, r.stdout + r.stderr


# The settle check's short cut: a unit settles as soon as its port listens, held by the unit
# itself. QUICK's stand-in listens at once; SQUATTED's port is held by another unit before
# the apply, so its own server fails to bind, and holding the port must not count.
QUICK, SQUATTED = "settlequick", "settlesquatted"
QUICK_PORT, SQUATTED_PORT = 8131, 8132
SQUATTER = "settle-squatter.service"
STAND_IN = "/usr/bin/python3 -m http.server --bind {bind} {port}"


def _settled(out: Path) -> list[list[str]]:
    return [line.split("\t")[1:] for line in out.read_text().splitlines()
            if line.startswith("@settled\t")]


@pytest.fixture(scope="module")
def settle_dir(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("settle")
    (d / "services.yml").write_text(f"hosts: [{HOST}]\nsteps: [services]\n")
    yield d
    lab.host(HOST, "systemctl", "stop", SQUATTER, check=False)
    for name in (QUICK, SQUATTED):
        lab.host(HOST, "systemctl", "disable", "--now", f"provision-{name}.service", check=False)
        lab.host(HOST, "rm", "-f", f"/etc/systemd/system/provision-{name}.service", check=False)
    lab.host(HOST, "systemctl", "daemon-reload", check=False)
    lab.host(HOST, "systemctl", "reset-failed", check=False)


def _apply(lab: Lab, d: Path, name: str, port: int) -> tuple[int, dict[str, Any], str, Path]:
    doc = one_host_inventory(lab, HOST, {name: {"port": port, "command": STAND_IN}})
    inventory = d / f"{name}.yml"
    inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = d / f"{name}.out"
    code, data, err = lab.provision_json(
        "apply", "--yes", "-i", str(inventory), "--playbook", str(d / "services.yml"),
        faults=("--batch-output", str(out)))
    return code, data, err, out


def test_a_service_that_listens_at_once_settles_without_the_pause(
        lab: Lab, settle_dir: Path) -> None:
    unit = f"provision-{QUICK}.service"
    code, data, err, out = _apply(lab, settle_dir, QUICK, QUICK_PORT)
    assert code == 0, err + json.dumps(data, indent=1)
    assert _settled(out) == [[unit, "early"]], out.read_text()
    listening = lab.host(HOST, "ss", "-Hltnp", f"sport = :{QUICK_PORT}").stdout
    pid = listening.split("pid=")[1].split(",")[0]
    assert lab.host(HOST, "cat", f"/proc/{pid}/cgroup").stdout.strip().endswith("/" + unit)


def test_a_port_held_by_another_process_is_not_the_service_settling(
        lab: Lab, settle_dir: Path) -> None:
    unit = f"provision-{SQUATTED}.service"
    lab.host(HOST, "systemd-run", "--unit", SQUATTER, "/usr/bin/python3", "-m", "http.server",
             "--bind", "127.0.0.1", str(SQUATTED_PORT))
    for _ in range(100):  # listening before the apply starts
        if lab.host(HOST, "ss", "-Hltn", f"sport = :{SQUATTED_PORT}").stdout.strip():
            break
        time.sleep(0.1)
    code, data, err, out = _apply(lab, settle_dir, SQUATTED, SQUATTED_PORT)
    assert code == 1, err + json.dumps(data, indent=1)
    assert _settled(out) == [], out.read_text()
    (host,) = [h for h in data["hosts"] if h["host"] == HOST]
    assert host["status"] == "failed" and host["unit_failure"]["unit"] == unit
    # named at once: the port's holder, outside the unit (before its server even fails)
    why = host["unit_failure"]["why"]
    assert why.startswith(f"port {SQUATTED_PORT} is held by pid ") and why.endswith(
        f": python3), not by {unit}"), host["unit_failure"]
    assert f"{unit} did not start: port {SQUATTED_PORT} is held by pid" in host["error"]
