"""A unit that cannot start says why, in the recap and in `--json`: systemd's result and
the last lines of the unit's journal (lab: a real systemd on gpu1).

The service's command (`ls` of a missing file) writes the path to stderr and exits 2; `systemctl start` of a
`Type=simple` unit succeeds anyway, so this also checks the settle check after the starts.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import PROVISION, Lab

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
    for key in ("roles", "dns"):
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
