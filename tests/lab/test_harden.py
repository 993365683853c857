"""Hardening against the lab's real hosts, through the bastion: sshd and the host firewall
applied commit-confirmed, and every way of locking the operator out rolled back by the host.

Works on gpu1 only, with a copy of the lab's inventory in which gpu1 also serves a public
model API (port 8000) to the bastion alone. A listener on 0.0.0.0/[::]:8888 and :8000 stands
in for services that would be exposed without a firewall. The module restores gpu1 to the
lab's unhardened state when it starts and when it ends (rules, files, sshd drop-in, stand-ins).

Figures (rollback durations, ssh-audit summary) are printed: run with `-s` to see them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.lab.state import read_state

from .conftest import FAULTY, Lab, model_api, one_host_inventory

pytestmark = pytest.mark.lab

HOST = "gpu1"
TIMEOUT = "6"  # --confirm-timeout where a lockout is expected: the host rolls back after it
# Where the change is good, the confirmation arrives in about a second; the default 30 s
# window keeps a slow first run (a cold machine, load) from rolling back a good change.
GOOD_TIMEOUT = "30"
DROPIN = "/etc/ssh/sshd_config.d/00-provision.conf"
COMMIT_DIR = "/var/lib/provision/commit"
STANDINS = {"harden-standin-8888": 8888, "harden-standin-8000": 8000}
ROLLBACK_RE = re.compile(r"restored by the host ([0-9.]+) s after arming")
FIGURES: dict[str, Any] = {"rollbacks": []}


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("harden")
    doc = one_host_inventory(lab, HOST, {"model-api": model_api(lab)})
    good = write(d / "inventory.yml", doc)
    # a firewall that admits SSH from the bastion's public address only: the bastion's
    # connections to gpu1 come from its private leg, so this locks the operator out
    locked = json.loads(json.dumps(doc))
    locked["bastions"]["bastion"]["egress"] = [f"{lab.addr('bastion', 'pub')}/32"]
    # a harmless change (one more API source, a documentation range) for the killed run
    wider = json.loads(json.dumps(doc))
    wider["hosts"][HOST]["services"]["model-api"]["expose"]["from"].append("192.0.2.0/24")
    _unharden(lab)  # start from the lab's stock host, whatever earlier modules applied
    # the lab's own model API (127.0.0.1:8000, behind its door) holds the stand-in's port
    lab.host(HOST, "systemctl", "stop", "provision-model-api.service", "provision-door.service",
             check=False)
    for unit, port in STANDINS.items():
        lab.host(HOST, "systemd-run", f"--unit={unit}", "/usr/bin/python3", "-m", "http.server",
                 "--bind", "::", str(port))
    yield {"dir": d, "good": good, "locked": write(d / "locked.yml", locked),
           "wider": write(d / "wider.yml", wider)}
    print(f"\nharden figures: {json.dumps(FIGURES, indent=1)}")
    _unharden(lab)


def _unharden(lab: Lab) -> None:
    script = "; ".join([
        *(f"systemctl stop {u}" for u in STANDINS),
        "systemctl disable --now provision-firewall.service",
        "rm -f /etc/iptables/rules.v4 /etc/iptables/rules.v6 /etc/iptables/provision-docker.v4 "
        "/etc/iptables/provision-docker.v6 /usr/local/sbin/provision-firewall "
        "/etc/systemd/system/provision-firewall.service "
        "/etc/systemd/system/docker.service.d/50-provision.conf " + DROPIN,
        "systemctl daemon-reload",
        *(f"{t} -w -D INPUT -j PROVISION-INPUT; {t} -w -D DOCKER-USER -j PROVISION-DOCKER; "
          f"{t} -w -F PROVISION-INPUT; {t} -w -X PROVISION-INPUT; {t} -w -F PROVISION-DOCKER; "
          f"{t} -w -X PROVISION-DOCKER" for t in ("iptables", "ip6tables")),
        "iptables -w -D FORWARD -j DOCKER-USER; iptables -w -D FORWARD -j DOCKER",
        "iptables -w -F DOCKER-USER; iptables -w -X DOCKER-USER; iptables -w -F DOCKER; "
        "iptables -w -X DOCKER; iptables -w -t nat -F DOCKER; iptables -w -t nat -X DOCKER",
        f"rm -rf {COMMIT_DIR}",
        "systemctl reload ssh.service",
    ])
    lab.host(HOST, "sh", "-c", script, check=False)


def apply(lab: Lab, inventory: Path, *extra: str, faults: tuple[str, ...] = (),
          confirm: str = GOOD_TIMEOUT, timeout: float = 240) -> tuple[int, dict[str, Any], str]:
    return lab.provision_json("apply", "--yes", "--playbook", "harden", "-i", str(inventory),
                              "--confirm-timeout", confirm, *extra, HOST, faults=faults,
                              timeout=timeout)


def result(data: dict[str, Any]) -> dict[str, Any]:
    (h,) = data["hosts"]
    assert h["host"] == HOST
    return h  # type: ignore[no-any-return]


def rules(lab: Lab) -> str:
    """Every table of both families, counters left out (they move)."""
    return "\n".join(lab.host(HOST, tool, "-w", "-t", table, "-S").stdout
                     for tool in ("iptables", "ip6tables") for table in ("filter", "nat"))


def reach(lab: Lab, src: str, address: str, port: int) -> bool:
    """A TCP connection from inside `src` (a lab container) to address:port."""
    probe = ("import socket,sys\n"
             f"try:\n socket.create_connection(({address!r}, {port}), timeout=2).close()\n"
             "except OSError:\n sys.exit(1)\n")
    return lab.host(src, "python3", "-c", probe, check=False).returncode == 0


def ssh_works(lab: Lab) -> bool:
    return lab.ssh(HOST, "true", check=False).returncode == 0


def audit(lab: Lab) -> subprocess.CompletedProcess[str]:
    """ssh-audit (the dev extra's, through the bind-mounted venv) from the bastion at gpu1."""
    exe = Path(lab.plan.venv) / "bin" / "ssh-audit"
    assert exe.exists(), "ssh-audit missing: install the dev extra"
    return lab.host("bastion", str(exe), "-n", lab.addr(HOST, "prv"), check=False, timeout=120)


def audit_summary(r: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    lines = r.stdout.splitlines()
    return {"exit": r.returncode, "fail": sum("[fail]" in ln for ln in lines),
            "warn": sum("[warn]" in ln for ln in lines),
            "warned": sorted({ln.split("--")[0].strip() for ln in lines
                              if "[warn]" in ln and ln.startswith("(")})}


def record_rollback(name: str, error: str) -> None:
    m = ROLLBACK_RE.search(error)
    assert m, f"no rollback time in: {error}"
    FIGURES["rollbacks"].append({"scenario": name, "arm_to_restored_s": float(m.group(1))})


# --- the tests, in order -----------------------------------------------------------------

def test_harden_applies_and_leaves_foreign_chains_alone(lab: Lab, world: dict[str, Any]) -> None:
    # stand-ins for Docker's chains: they must survive our apply untouched
    lab.host(HOST, "sh", "-ec", "; ".join([
        "iptables -w -N DOCKER", "iptables -w -N DOCKER-USER",
        "iptables -w -A DOCKER-USER -j RETURN",
        "iptables -w -A DOCKER -d 172.17.0.2/32 -p tcp --dport 80 -j ACCEPT",
        "iptables -w -A FORWARD -j DOCKER-USER", "iptables -w -A FORWARD -j DOCKER",
        "iptables -w -t nat -N DOCKER",
        "iptables -w -t nat -A DOCKER -p tcp --dport 9999 -j DNAT --to-destination 172.17.0.2:80",
    ]))
    before = rules(lab)
    FIGURES["ssh_audit_before"] = audit_summary(audit(lab))  # the stock sshd, for comparison
    code, data, err = apply(lab, world["good"])
    assert code == 0, err + json.dumps(data, indent=1)
    h = result(data)
    assert h["status"] == "changed" and h["changed"] == 2, h
    after = rules(lab)
    for line in before.splitlines():
        if "DOCKER" in line:
            assert line in after, f"foreign rule lost: {line}"
    v4 = lab.host(HOST, "iptables", "-w", "-S").stdout.splitlines()
    assert v4.count("-A INPUT -j PROVISION-INPUT") == 1
    # Docker is "there" (DOCKER-USER exists): published ports restricted from DOCKER-USER
    assert "-A DOCKER-USER -j PROVISION-DOCKER" in v4
    assert v4.index("-A DOCKER-USER -j PROVISION-DOCKER") < v4.index("-A DOCKER-USER -j RETURN")
    assert lab.host(HOST, "systemctl", "is-enabled", "provision-firewall.service").stdout.strip() == "enabled"
    assert "AllowTcpForwarding no" in lab.host(HOST, "cat", DROPIN).stdout
    assert lab.host(HOST, "ls", "-A", COMMIT_DIR, check=False).stdout.strip() == ""


def test_second_apply_changes_nothing(lab: Lab, world: dict[str, Any]) -> None:
    code, data, err = apply(lab, world["good"])
    assert code == 0, err
    h = result(data)
    assert (h["status"], h["changes"], h["remote_execs"]) == ("ok", 0, 1), h


def test_only_declared_traffic_gets_in(lab: Lab, world: dict[str, Any]) -> None:
    v4, v6 = lab.addr(HOST, "prv"), lab.addr(HOST, "prv", v6=True)
    for addr in (v4, v6):
        assert reach(lab, "bastion", addr, 22), addr
        assert not reach(lab, "bastion", addr, 8888), addr  # listening on [::], dropped
        assert reach(lab, "bastion", addr, 8000), addr  # the API's declared source
        assert not reach(lab, "gpu2", addr, 8000), addr  # not declared
        assert not reach(lab, "gpu2", addr, 22), addr
    six = lab.host(HOST, "ip6tables", "-w", "-S", "PROVISION-INPUT").stdout.splitlines()
    assert six[-1].startswith("-A PROVISION-INPUT") and six[-1].endswith("-j DROP")
    assert "-A INPUT -j PROVISION-INPUT" in lab.host(HOST, "ip6tables", "-w", "-S").stdout
    # neighbour discovery still works: empty caches, then ping6 both ways over the ULAs
    for h in ("bastion", HOST):
        lab.host(h, "ip", "-6", "neigh", "flush", "all")
    r = lab.host("bastion", "ping", "-6", "-c", "2", "-W", "2", v6, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    r = lab.host(HOST, "ping", "-6", "-c", "2", "-W", "2", lab.addr("bastion", "prv", v6=True),
                 check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_ssh_audit_passes_and_paramiko_still_connects(lab: Lab, world: dict[str, Any]) -> None:
    r = audit(lab)
    assert r.returncode in (0, 2), f"ssh-audit exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    FIGURES["ssh_audit"] = audit_summary(r)
    assert FIGURES["ssh_audit"]["fail"] == 0
    from provision.inventory import load_inventory
    from provision.ssh.connect import connect
    from provision.ssh.session import Remote

    inv = load_inventory(world["good"])
    with lab.operator_netns():
        chain = connect(inv, inv.node(HOST))
    try:
        out = Remote(chain).sh("hostname")
        assert out.status == 0 and out.stdout.strip() == HOST
        t = chain.conn.transport
        FIGURES["paramiko"] = {"cipher": t.remote_cipher, "mac": t.remote_mac}
    finally:
        chain.close()


def test_firewall_lockout_is_rolled_back_by_the_host(lab: Lab, world: dict[str, Any]) -> None:
    before = rules(lab)
    code, data, err = apply(lab, world["locked"], confirm=TIMEOUT)
    assert code == 1, err + json.dumps(data, indent=1)
    h = result(data)
    assert h["status"] == "failed"
    assert ("firewall: confirmation over a new connection did not arrive within 6 s; "
            "previous rules restored") in h["error"], h["error"]
    record_rollback("firewall: ssh only from the bastion's public address", h["error"])
    assert rules(lab) == before
    assert ssh_works(lab)
    assert apply(lab, world["good"])[1]["hosts"][0]["status"] == "ok"  # files restored too


def test_sshd_refusing_the_operator_is_rolled_back(lab: Lab, world: dict[str, Any]) -> None:
    dropin = lab.host(HOST, "cat", DROPIN).stdout
    code, data, err = apply(lab, world["good"], confirm=TIMEOUT,
                            faults=("--sshd-extra", "AllowUsers nobody"))
    assert code == 1, err + json.dumps(data, indent=1)
    h = result(data)
    assert ("sshd: confirmation over a new connection did not arrive within 6 s; "
            "previous sshd config restored") in h["error"], h["error"]
    record_rollback("sshd: AllowUsers nobody", h["error"])
    assert lab.host(HOST, "cat", DROPIN).stdout == dropin
    assert ssh_works(lab)


def test_invalid_sshd_config_is_never_installed(lab: Lab, world: dict[str, Any]) -> None:
    dropin = lab.host(HOST, "cat", DROPIN).stdout
    code, data, err = apply(lab, world["good"],
                            faults=("--sshd-extra", "NoSuchKeyword yes"))
    assert code == 1, err
    h = result(data)
    assert "sshd: rejected on the host, nothing changed" in h["error"]
    assert "Bad configuration option: NoSuchKeyword" in h["error"]  # sshd's own words
    assert lab.host(HOST, "cat", DROPIN).stdout == dropin
    assert lab.host(HOST, "ls", "-A", COMMIT_DIR, check=False).stdout.strip() == ""
    listed = lab.host(HOST, "systemctl", "list-timers", "--all", "--no-legend").stdout
    assert "provision-rollback" not in listed
    assert ssh_works(lab)


def test_operator_killed_mid_apply_host_rolls_back(lab: Lab, world: dict[str, Any]) -> None:
    before = rules(lab)
    cmd = ["ip", "netns", "exec", lab.plan.operator.netns, *FAULTY, "--sleep-before-confirm",
           "60", "--", "apply", "--yes", "--playbook", "harden", "-i", str(world["wider"]),
           "--json", "--confirm-timeout", TIMEOUT, HOST]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    applied = False
    commit = ""
    try:
        for _ in range(300):  # until the wider rules are in and the rollback is armed
            # check=False: the chain may not exist yet, or be mid-update (nft says "incompatible")
            v4 = lab.host(HOST, "iptables", "-w", "-S", "PROVISION-INPUT", check=False).stdout
            ls = lab.host(HOST, "sh", "-c", f"ls {COMMIT_DIR}/*/armed", check=False).stdout
            if "192.0.2.0/24" in v4 and ls.strip():
                applied, commit = True, ls.strip().split("/")[-2]
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert applied, "the apply never got its rules in"
    d = f"{COMMIT_DIR}/{commit}"
    for _ in range(300):  # the host's own timer: TIMEOUT s after arming
        if lab.host(HOST, "test", "-e", f"{d}/result", check=False).returncode == 0:
            break
        time.sleep(0.1)
    got = lab.host(HOST, "sh", "-c", f"cat {d}/result {d}/armed-at {d}/restored-at").stdout.split()
    assert got[0] == "rolled-back"
    FIGURES["rollbacks"].append({"scenario": "operator killed after apply, before confirm",
                                 "arm_to_restored_s": round(float(got[2]) - float(got[1]), 2)})
    assert rules(lab) == before
    assert "192.0.2.0/24" not in lab.host(HOST, "cat", "/etc/iptables/rules.v4").stdout
    assert ssh_works(lab)
    lab.host(HOST, "rm", "-rf", d)
    code, data, _ = apply(lab, world["good"])
    assert code == 0 and result(data)["status"] == "ok"


def test_restarted_host_comes_back_with_the_same_rules(lab: Lab, world: dict[str, Any]) -> None:
    from provision.lab.restart import restart_host

    def ours() -> str:
        return "\n".join(line for line in rules(lab).splitlines()
                         if "PROVISION" in line and "DOCKER" not in line)

    before = ours()
    assert "-A PROVISION-INPUT" in before
    restart_host(lab.name, HOST)
    state = read_state(lab.name)
    assert state is not None
    lab.state = state  # the container has a new pid
    assert ours() == before
    assert ssh_works(lab)
    code, data, _ = apply(lab, world["good"])
    assert code == 0 and result(data)["status"] == "ok"
