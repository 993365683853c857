"""The GPU fact's shell fragment on a real host (issue 38, item 5). The lab has no GPU: a
stand-in `nvidia-smi` on gpu1's PATH (/usr/local/bin, in the host's own overlay) prints a
recorded case of tests/facts/gpus/ (tests/support/fake_nvidia_smi.py) and exits as that
case did. Through the real probe, over SSH through the bastion: `audit` reports the
mismatch and the GPU off the bus, `plan` prints the GPUs' line and refuses a member's `gpus`
index the host lacks; with the stand-in gone the host reports no GPUs."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import fake_nvidia_smi as F

from .conftest import PROVISION, Lab, one_host_inventory

pytestmark = pytest.mark.lab

HOST = "gpu1"
SMI = "/usr/local/bin/nvidia-smi"
ARGS = "/tmp/fake-nvidia-smi.args"
PLAYBOOK = "name: gpus\nhosts: [all]\nsteps: [services]\n"


def _place(lab: Lab, case: str) -> None:
    lab.host(HOST, "sh", "-c", 'printf "%s" "$1" > "$2" && chmod 755 "$2"', "sh",
             F.script(case, ARGS), SMI)


def _remove(lab: Lab) -> None:
    lab.host(HOST, "rm", "-f", SMI, ARGS, check=False)


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    d = tmp_path_factory.mktemp("gpus")
    # bob's server would see GPU 8: the stand-in lists 0-7
    doc = one_host_inventory(lab, HOST, services={
        "jupyter": {"venv": lab.plan.venv, "per_user": {"bob": {"gpus": [8]}}}})
    (d / "inventory.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    (d / "pb.yml").write_text(PLAYBOOK)
    yield {"inventory": d / "inventory.yml", "playbook": d / "pb.yml"}
    _remove(lab)


def _audit(lab: Lab) -> tuple[int, dict[str, Any]]:
    code, data, err = lab.provision_json("audit", HOST, "--no-aws", "-i", str(lab.inventory))
    assert data, err
    return code, next(h for h in data["hosts"] if h["host"] == HOST)


def _gpu_findings(host: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["severity"], f["code"]) for f in host["findings"] if f["code"].startswith("gpu-")]


def test_audit_reports_a_driver_library_mismatch(lab: Lab, world: dict[str, Path]) -> None:
    _place(lab, "mismatch")
    _, host = _audit(lab)
    assert _gpu_findings(host) == [("error", "gpu-driver-mismatch")], host["findings"]
    assert host["gpus"].startswith("gpus: driver/library version mismatch")
    # the query the fragment sent, as nvidia-smi got it
    args = lab.host(HOST, "cat", ARGS).stdout.split("\n")
    assert args[0].startswith("--query-gpu=index,name,uuid,driver_version,memory.total,")
    assert args[1] == "--format=csv,noheader,nounits"


def test_audit_reports_a_gpu_off_the_bus(lab: Lab, world: dict[str, Path]) -> None:
    _place(lab, "fallen-off")
    _, host = _audit(lab)
    found = [f for f in host["findings"] if f["code"] == "gpu-off-the-bus"]
    assert [f["subject"] for f in found] == [f"{HOST}/0000:db:00.0"], host["findings"]
    assert "GPU is lost" in found[0]["message"]


def test_plan_prints_the_gpus_and_refuses_an_index_the_host_lacks(
        lab: Lab, world: dict[str, Path]) -> None:
    _place(lab, "eight")
    r = subprocess.run(["env", "COLUMNS=200", "ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, "plan",
                        HOST, "--playbook", str(world["playbook"]), "-i", str(world["inventory"])],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("bob's gpus [8] do not exist on this host (nvidia-smi lists 8 GPU(s): 0, 1, 2, 3, "
            "4, 5, 6, 7; NVIDIA H100 80GB HBM3)") in " ".join(r.stdout.split()), r.stdout
    # with bob on GPU 7 the plan goes through, and says what the host has
    doc = yaml.safe_load(world["inventory"].read_text())
    doc["hosts"][HOST]["services"]["jupyter"]["per_user"]["bob"]["gpus"] = [7]
    ok = world["inventory"].with_name("inventory-7.yml")
    ok.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = subprocess.run(["env", "COLUMNS=200", "ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, "plan",
                        HOST, "--playbook", str(world["playbook"]), "-i", str(ok)],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "  gpus: 8 × NVIDIA H100 80GB HBM3, driver 550.90.07" in r.stdout, r.stdout
    code, data, err = lab.provision_json("plan", HOST, "--playbook", str(world["playbook"]),
                                         "-i", str(ok))
    assert code == 0, err
    facts = next(h for h in data["hosts"] if h["host"] == HOST)["facts"]
    assert [g["index"] for g in facts["gpus"]] == list(range(8)), facts
    assert facts["gpus"][0]["uuid"].startswith("GPU-")


def test_without_nvidia_smi_the_host_reports_no_gpus(lab: Lab, world: dict[str, Path]) -> None:
    _remove(lab)
    _, host = _audit(lab)
    assert _gpu_findings(host) == [] and host["gpus"] is None, host
    code, data, err = lab.provision_json("plan", HOST, "--playbook", str(world["playbook"]),
                                         "-i", str(world["inventory"]))
    assert code == 0, err  # bob's gpus: [8] cannot be checked, and is not refused
    run = next(h for h in data["hosts"] if h["host"] == HOST)
    assert run["facts"]["gpus"] == [] and run["facts"]["gpu_summary"] is None, run
    assert "gpus of bob not checked: no nvidia-smi on this host" in (run["note"] or ""), run
