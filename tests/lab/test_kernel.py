"""The kernel baseline on a real lab host (a systemd-nspawn container: its network
namespace's keys are its own, the rest the machine's kernel's; docs/hardening.md).

- Applied: the network keys really change in the host's namespace (read with `sysctl -n`
  there) and not in the machine's; the shared kernel's keys are left out, said in the note.
- A no-op re-run is "No changes"; a `sysctl -w` by hand is drift in the next plan.
- A file in /etc/sysctl.d applied after ours that sets one of our keys is refused, named.
- Docker on the host (the lab's hosts have the `docker` command): forwarding untouched.
- A training cluster's port range, in its own file, is kept.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.steps.kernel import SYSCTL_FILE

from .conftest import Lab, one_host_inventory

pytestmark = pytest.mark.lab

HOST = "gpu1"
NET = {"net.ipv4.conf.all.rp_filter": "1", "net.ipv4.conf.all.accept_redirects": "0",
       "net.ipv6.conf.all.accept_redirects": "0", "net.ipv4.conf.all.send_redirects": "0",
       "net.ipv4.conf.default.accept_source_route": "0", "net.ipv4.conf.all.log_martians": "1",
       "net.ipv4.tcp_syncookies": "1"}
LOCAL = "/etc/sysctl.d/99-zz-local.conf"


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    d = tmp_path_factory.mktemp("kernel")
    (d / "kernel.yml").write_text("name: kernel\nhosts: [all]\nsteps: [kernel]\n")
    (d / "cluster.yml").write_text("name: kc\nhosts: [all]\nsteps: [kernel, cluster]\n")
    doc = one_host_inventory(lab, HOST)
    doc["hosts"][HOST].pop("services", None)
    (d / "inv.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    doc["hosts"][HOST]["ephemeral_ports"] = [40000, 40999]
    (d / "ports.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    yield {"playbook": d / "kernel.yml", "cluster": d / "cluster.yml", "inv": d / "inv.yml",
           "ports": d / "ports.yml"}
    lab.host(HOST, "rm", "-f", LOCAL, check=False)


def run(lab: Lab, verb: str, world: dict[str, Path], inv: str = "inv",
        playbook: str = "playbook") -> tuple[int, dict[str, Any], str]:
    extra = ("--yes",) if verb == "apply" else ()
    return lab.provision_json(verb, *extra, "--playbook", str(world[playbook]), "-i",
                              str(world[inv]), HOST, timeout=180)


def host(data: dict[str, Any]) -> dict[str, Any]:
    (h,) = data["hosts"]
    return h


def sysctl(lab: Lab, key: str) -> str:
    return " ".join(lab.host(HOST, "sysctl", "-n", key).stdout.split())


def machine(key: str) -> str:
    return " ".join(subprocess.run(["sysctl", "-n", key], capture_output=True, text=True,
                                   check=True).stdout.split())


def test_the_baseline_is_applied_and_read_back(lab: Lab, world: dict[str, Path]) -> None:
    lab.host(HOST, "sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=0",
             "net.ipv4.conf.all.log_martians=0")
    before = {k: machine(k) for k in NET}
    code, data, err = run(lab, "apply", world)
    assert code == 0, err + json.dumps(data, indent=1)
    h = host(data)
    assert h["status"] == "changed", h
    for key, value in NET.items():
        assert sysctl(lab, key) == value, key
    assert {k: machine(k) for k in NET} == before  # the machine's own namespace: untouched
    assert "kernel.kptr_restrict" in h["note"] and "not settable in a container" in h["note"]
    text = lab.host(HOST, "cat", SYSCTL_FILE).stdout
    assert "net.ipv4.conf.all.rp_filter = 1" in text and "kernel.kptr_restrict" not in text
    assert "* hard core 0" in lab.host(HOST, "cat", "/etc/security/limits.d/90-provision-core.conf").stdout
    assert "install sctp /bin/true" in lab.host(HOST, "cat", "/etc/modprobe.d/provision-hardening.conf").stdout
    code, data, err = run(lab, "plan", world)
    assert code == 0 and host(data)["changes"] == 0, err + json.dumps(data, indent=1)


def test_a_sysctl_w_by_hand_is_drift(lab: Lab, world: dict[str, Path]) -> None:
    lab.host(HOST, "sysctl", "-q", "-w", "net.ipv4.conf.all.accept_redirects=1")
    code, data, err = run(lab, "plan", world)
    h = host(data)
    assert code == 0 and h["changes"] == 1, err + json.dumps(data, indent=1)
    (action,) = h["actions"]
    assert action["description"] == ("sysctl net.ipv4.conf.all.accept_redirects = 0 "
                                      "(the kernel runs 1)"), action
    code, data, err = run(lab, "apply", world)
    assert code == 0, err
    assert sysctl(lab, "net.ipv4.conf.all.accept_redirects") == "0"


def test_a_later_file_overriding_a_key_is_refused_and_named(lab: Lab, world: dict[str, Path]) -> None:
    lab.host(HOST, "sh", "-c", f"printf '# local\\nnet.ipv4.conf.all.log_martians = 0\\n' > {LOCAL}")
    try:
        code, data, err = run(lab, "plan", world)
        h = host(data)
        assert code == 1 and h["status"] == "failed", err + json.dumps(data, indent=1)
        assert f"{LOCAL}:2 sets net.ipv4.conf.all.log_martians = 0" in h["error"], h["error"]
        code, data, _ = run(lab, "apply", world)
        assert code == 1  # nothing applied: the running value stays ours
        assert sysctl(lab, "net.ipv4.conf.all.log_martians") == "1"
    finally:
        lab.host(HOST, "rm", "-f", LOCAL)
    code, data, err = run(lab, "plan", world)
    assert code == 0 and host(data)["changes"] == 0, err


def test_dockers_forwarding_is_left_alone(lab: Lab, world: dict[str, Path]) -> None:
    code, data, err = run(lab, "plan", world)
    assert host(data)["facts"]["docker"], "the lab host has no docker command"
    lab.host(HOST, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
    try:
        code, data, err = run(lab, "apply", world)
        assert code == 0 and host(data)["status"] == "ok", err + json.dumps(data, indent=1)
        assert sysctl(lab, "net.ipv4.ip_forward") == "1"
        assert "forward" not in lab.host(HOST, "cat", SYSCTL_FILE).stdout
    finally:
        lab.host(HOST, "sysctl", "-q", "-w", "net.ipv4.ip_forward=0")


def test_the_clusters_port_range_is_kept(lab: Lab, world: dict[str, Path]) -> None:
    code, data, err = run(lab, "apply", world, inv="ports", playbook="cluster")
    assert code == 0, err + json.dumps(data, indent=1)
    assert sysctl(lab, "net.ipv4.ip_local_port_range") == "40000 40999"
    code, data, err = run(lab, "plan", world, inv="ports", playbook="cluster")
    assert code == 0 and host(data)["changes"] == 0, err + json.dumps(data, indent=1)
    code, data, err = run(lab, "plan", world)  # the baseline alone leaves the range alone too
    assert code == 0 and host(data)["changes"] == 0, err
    assert sysctl(lab, "net.ipv4.ip_local_port_range") == "40000 40999"
