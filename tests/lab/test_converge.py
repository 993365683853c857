"""plan/apply against the lab's real hosts, through the bastion, as a non-root login user
(so every remote command goes through `sudo -n`).

The module works on a copy of the lab's inventory: the team gets a third member (carol),
and the GPU hosts run a Jupyter stand-in (`python3 -m http.server` on 127.0.0.1:8888)
instead of the role's real Jupyter, which is stopped while this module runs and restarted
afterwards if it was running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.watch import Watch

from .conftest import FAULTY, PROVISION, Lab

pytestmark = pytest.mark.lab

GPUS = ("gpu1", "gpu2")
NODES = ("bastion", *GPUS)  # the bootstrap playbook converges the bastion first
STANDIN = "notebook"
STANDIN_UNIT = f"provision-{STANDIN}.service"


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("converge")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "carol@lab",
                    "-f", str(d / "carol")], check=True)
    doc = yaml.safe_load(lab.inventory.read_text())
    doc["team"]["carol"] = {"keys": [(d / "carol.pub").read_text().strip()],
                            "identity_file": str(d / "carol")}
    doc["hosts"] = {name: {"address": doc["hosts"][name]["address"], "via": "bastion",
                           "packages": ["openssh-server"],  # installed: no network in the lab
                           "services": {STANDIN: {
                               "port": 8888,
                               "command": "/usr/bin/python3 -m http.server --bind {bind} {port}"}}}
                    for name in GPUS}
    doc.pop("roles", None)
    doc.pop("dns", None)
    was_active = {}
    for h in GPUS:
        r = lab.host(h, "systemctl", "is-active", "provision-jupyter.service", check=False)
        was_active[h] = r.stdout.strip() == "active"
        if was_active[h]:
            lab.host(h, "systemctl", "stop", "provision-jupyter.service")
    yield {"dir": d, "doc": doc, "inventory": write_inventory(d / "inventory.yml", doc)}
    for h in GPUS:
        lab.host(h, "systemctl", "disable", "--now", STANDIN_UNIT, check=False)
        if was_active[h]:
            lab.host(h, "systemctl", "start", "provision-jupyter.service", check=False)


def write_inventory(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run(lab: Lab, *args: str, inventory: Path, env: dict[str, str] | None = None,
        timeout: float = 240) -> tuple[int, dict[str, Any], str]:
    """provision ARGS -i INVENTORY --json in the operator namespace: (exit code, JSON, stderr)."""
    return lab.provision_json(*args, "-i", str(inventory), env=env, timeout=timeout)


def by_host(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["host"]: h for h in data["hosts"]}


def login(lab: Lab, user: str, host: str, key: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    """Real ssh as `user` with `key`. A transport failure (not an authentication refusal) is
    retried: the shared CI machine can stall a container for a while."""
    r = None
    for _ in range(3):
        try:
            r = lab.ssh(host, *cmd, check=False,
                        extra=("-l", user, "-i", str(key), "-o", "IdentitiesOnly=yes"))
        except subprocess.TimeoutExpired:
            continue
        if r.returncode != 255 or "Permission denied" in r.stderr:
            return r
    assert r is not None, f"ssh {user}@{host} timed out three times"
    return r


def refused(r: subprocess.CompletedProcess[str]) -> bool:
    return r.returncode == 255 and "Permission denied" in r.stderr


def team_key(lab: Lab, world: dict[str, Any], user: str) -> Path:
    return world["dir"] / "carol" if user == "carol" else lab.dir / "team" / user


# --- the tests, in order --------------------------------------------------------------

def test_bootstrap_through_the_bastion(lab: Lab, world: dict[str, Any]) -> None:
    code, data, err = run(lab, "apply", "--yes", inventory=world["inventory"])
    assert code == 0, err + json.dumps(data, indent=1)
    hosts = by_host(data)
    assert set(hosts) == set(NODES)
    for h in NODES:
        assert hosts[h]["status"] in ("changed", "ok"), hosts[h]
        # one probe, one batch (plain actions + the sshd/firewall commits), one confirmation
        # over a new connection through the bastion
        assert hosts[h]["remote_execs"] <= 3
    code, data, err = run(lab, "plan", "--detailed-exitcode", inventory=world["inventory"])
    assert code == 0, err + json.dumps(data, indent=1)


def test_each_member_logs_in_with_their_own_key_and_sudo_as_declared(
        lab: Lab, world: dict[str, Any]) -> None:
    for h in GPUS:
        for user in ("alice", "bob", "carol"):
            r = login(lab, user, h, team_key(lab, world, user), "id", "-un")
            assert r.returncode == 0 and r.stdout.strip() == user, (h, user, r.stderr)
        assert login(lab, "alice", h, team_key(lab, world, "alice"), "sudo", "-n", "true").returncode == 0
        assert login(lab, "bob", h, team_key(lab, world, "bob"), "sudo", "-n", "true").returncode != 0
        # someone else's key does not open an account
        assert refused(login(lab, "bob", h, team_key(lab, world, "alice"), "true"))
        lab.host(h, "visudo", "-c")


def _listening(lab: Lab, host: str, port: int) -> list[str]:
    for _ in range(50):  # systemd starts the unit asynchronously: wait for the socket
        lines = [ln for ln in lab.host(host, "ss", "-Htlnp").stdout.splitlines()
                 if f":{port} " in ln]
        if lines:
            return lines
        time.sleep(0.2)
    return []


def test_standin_listens_on_loopback_only(lab: Lab, world: dict[str, Any]) -> None:
    for h in GPUS:
        lines = _listening(lab, h, 8888)
        assert lines and all("127.0.0.1:8888 " in ln for ln in lines), lines
        assert "python3" in lines[0]
        addr = lab.addr(h, "prv")
        probe = ("import socket,sys\ns=socket.socket()\ns.settimeout(3)\n"
                 f"sys.exit(s.connect_ex(({addr!r}, 8888)) == 0)\n")
        r = lab.host("bastion", "python3", "-c", probe, check=False)
        assert r.returncode == 0, f"{h}:8888 is reachable from the bastion"


def test_second_apply_changes_nothing_in_one_remote_exec(lab: Lab, world: dict[str, Any]) -> None:
    code, data, err = run(lab, "apply", "--yes", inventory=world["inventory"])
    assert code == 0, err
    for h, r in by_host(data).items():
        assert (r["status"], r["changed"], r["changes"], r["remote_execs"]) == ("ok", 0, 0, 1), (h, r)
    assert data["summary"] == {"ok": len(NODES)}


def test_apply_without_terminal_or_yes_is_refused(lab: Lab, world: dict[str, Any]) -> None:
    r = subprocess.run(["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, "apply",
                        "-i", str(world["inventory"])], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60)
    assert r.returncode == 2 and "--yes" in r.stderr


GATE = "/run/provision-test-gate"


def apply_opening(lab: Lab, inv: Path, gate: str, said: str,
                  deadline: float = 240) -> tuple[int, dict[str, Any], str]:
    """`apply --yes --json` of `inv`; once its stderr says `said`, `gate` is created on gpu1.
    Fails if the run never says it (the mechanism, not how long anything took)."""
    p = subprocess.Popen(["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, "apply",
                          "--yes", "-i", str(inv), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    w = Watch(p, said)
    try:
        ok = w.said.wait(deadline)
    finally:
        lab.host("gpu1", "touch", gate)
    p.wait(timeout=300)
    w.join()
    assert ok, f"the run never said {said!r}:\n{''.join(w.lines)}"
    return w.result()


def test_sigkill_halfway_then_apply_converges_without_temp_files(
        lab: Lab, world: dict[str, Any]) -> None:
    doc = json.loads(json.dumps(world["doc"]))
    extra = world["dir"] / "bob2"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(extra)], check=True)
    doc["team"]["bob"]["keys"].append((extra.with_suffix(".pub")).read_text().strip())
    inv = write_inventory(world["dir"] / "inventory-bob2.yml", doc)
    target = "/home/bob/.ssh/authorized_keys"
    before = {h: lab.host(h, "cat", target).stdout for h in GPUS}
    # the killed run's batch holds each rename until GATE exists on gpu1: it is still on the
    # host, asleep before its rename, for as long as the next run needs to see it there
    lab.host("gpu1", "rm", "-f", GATE)
    cmd = ["ip", "netns", "exec", lab.plan.operator.netns, *FAULTY, "--pause-until", GATE,
           "--", "apply", "--yes", "-i", str(inv), "--json", "gpu1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: list[str] = []
    try:
        for _ in range(1500):  # until the first temp file lands on gpu1 (or the run ends)
            seen = [n for n in lab.host("gpu1", "ls", "-A", "/home/bob/.ssh").stdout.split()
                    if n.startswith(".provision-tmp.")]
            if seen or proc.poll() is not None:
                break
            time.sleep(0.1)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert seen, "the apply never reached its first write"
    now = lab.host("gpu1", "cat", target).stdout
    assert now == before["gpu1"], "the target changed although the run was killed before rename"
    # This run takes the killed run's lock over and waits for that batch to end; the gate
    # opens only once it says so, then the batch renames and dies writing to the closed
    # session, and this run plans from what it left: nothing more to do on gpu1.
    code, data, err = apply_opening(lab, inv, GATE, "gpu1: waiting for commands of the "
                                    "previous holder still running on the host")
    assert code == 0, err
    g1 = by_host(data)["gpu1"]
    assert g1["lock"]["took_over"]["state"] == "closed", g1
    assert "gpu1: took over a stale lock from apply by " in err
    assert g1["status"] == "ok", g1
    assert by_host(data)["gpu2"]["status"] == "changed"
    for h in GPUS:
        # only the managed directories this inventory creates (no /etc/provision without Jupyter)
        dirs = [d for d in ("/home", "/etc/systemd/system", "/etc/sudoers.d", "/etc/provision")
                if lab.host(h, "test", "-d", d, check=False).returncode == 0]
        assert "/home" in dirs and "/etc/sudoers.d" in dirs
        left = lab.host(h, "find", *dirs, "-name", ".provision-tmp.*").stdout.split()
        assert left == [], (h, left)
        assert "bob2" not in before[h]
        assert extra.with_suffix(".pub").read_text().split()[1] in lab.host(h, "cat", target).stdout
    code, data, _ = run(lab, "apply", "--yes", inventory=inv)
    assert code == 0 and data["summary"] == {"ok": len(NODES)}
    assert run(lab, "apply", "--yes", inventory=world["inventory"])[0] == 0  # back to the module's


def test_team_members_reach_the_bastion_and_tunnel_through_it_as_themselves(
        lab: Lab, world: dict[str, Any]) -> None:
    """The bastion is converged too, so each member rides it with their own key: `provision
    tunnel gpu1 --user alice` works end to end, and bob's key does not open alice's account."""
    r = login(lab, "alice", "bastion", team_key(lab, world, "alice"), "id", "-un")
    assert r.returncode == 0 and r.stdout.strip() == "alice", r.stderr
    assert refused(login(lab, "alice", "bastion", team_key(lab, world, "bob"), "true"))
    for user in ("alice", "carol"):
        t = subprocess.run(["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, "tunnel",
                            "-i", str(world["inventory"]), "gpu1", "--user", user, "--check",
                            "--json"], capture_output=True, text=True, timeout=120)
        assert t.returncode == 0, (user, t.stdout, t.stderr)
        (fwd,) = json.loads(t.stdout)["forwards"]
        assert fwd["service"] == STANDIN and " 200 " in (fwd["answer"] or ""), fwd


def test_removed_member_loses_access_on_next_apply(lab: Lab, world: dict[str, Any]) -> None:
    doc = json.loads(json.dumps(world["doc"]))
    del doc["team"]["carol"]
    inv = write_inventory(world["dir"] / "inventory-nocarol.yml", doc)
    code, data, err = run(lab, "apply", "--yes", inventory=inv)
    assert code == 0, err
    for h in GPUS:
        r = by_host(data)[h]
        assert any("retire user carol" in a["description"] for a in r["actions"]), r
        keys = lab.host(h, "cat", "/home/carol/.ssh/authorized_keys").stdout
        assert "ssh-ed25519" not in keys and keys.startswith("# Managed by provision")
        assert refused(login(lab, "carol", h, team_key(lab, world, "carol"), "true"))
        assert login(lab, "alice", h, team_key(lab, world, "alice"), "true").returncode == 0
    code, data, _ = run(lab, "apply", "--yes", inventory=inv)
    assert code == 0 and data["summary"] == {"ok": len(NODES)}
    # carol comes back: her account is reactivated and her key works again
    code, data, err = run(lab, "apply", "--yes", inventory=world["inventory"])
    assert code == 0, err
    assert login(lab, "carol", "gpu1", team_key(lab, world, "carol"), "true").returncode == 0


def test_unreachable_host_does_not_stop_the_others(lab: Lab, world: dict[str, Any]) -> None:
    doc = json.loads(json.dumps(world["doc"]))
    good = lab.addr("gpu2", "prv")
    doc["hosts"]["gpu2"]["address"] = good.rsplit(".", 1)[0] + ".249"  # nobody there
    inv = write_inventory(world["dir"] / "inventory-lost.yml", doc)
    code, data, _ = run(lab, "apply", "--yes", inventory=inv)
    assert code == 1
    hosts = by_host(data)
    assert hosts["gpu1"]["status"] == "ok"
    assert hosts["gpu2"]["status"] == "unreachable" and hosts["gpu2"]["error"]
    assert hosts["bastion"]["status"] == "ok"
    assert data["summary"] == {"ok": 2, "unreachable": 1}


def _known_hosts(lab: Lab, path: Path, drop: str = "", replace: str = "") -> Path:
    lines = []
    for line in lab.known_hosts.read_text().splitlines():
        names = line.split(" ", 1)[0].split(",")
        if drop and drop in names:
            continue
        if replace and replace in names:
            other = next(x for x in lab.known_hosts.read_text().splitlines()
                         if "ns1" in x.split(" ", 1)[0].split(","))
            line = line.split(" ", 1)[0] + " " + other.split(" ", 1)[1]  # ns1's key: wrong
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_unknown_host_key_is_refused_then_accepted_with_accept_new(
        lab: Lab, world: dict[str, Any]) -> None:
    doc = json.loads(json.dumps(world["doc"]))
    kh = _known_hosts(lab, world["dir"] / "known_hosts.nogpu1", drop="gpu1")
    doc["defaults"]["known_hosts"] = str(kh)
    inv = write_inventory(world["dir"] / "inventory-nogpu1.yml", doc)
    code, data, _ = run(lab, "plan", inventory=inv)
    hosts = by_host(data)
    assert code == 1 and hosts["gpu2"]["status"] == "ok"
    assert hosts["gpu1"]["status"] == "unreachable"
    assert "unknown host key" in hosts["gpu1"]["error"] and "--accept-new" in hosts["gpu1"]["error"]
    assert kh.read_text().count("\n") == len(lab.known_hosts.read_text().splitlines()) - 1
    code, data, err = run(lab, "plan", "--accept-new", inventory=inv)
    assert code == 0, err
    added = kh.read_text().splitlines()[-1].split()
    real = next(x for x in lab.known_hosts.read_text().splitlines() if "gpu1" in x.split(" ")[0])
    assert added[0] == lab.addr("gpu1", "prv") and added[1:] == real.split()[1:3]
    assert run(lab, "plan", inventory=inv)[0] == 0  # now known


def test_unknown_bastion_key_is_refused(lab: Lab, world: dict[str, Any]) -> None:
    doc = json.loads(json.dumps(world["doc"]))
    doc["defaults"]["known_hosts"] = str(_known_hosts(lab, world["dir"] / "known_hosts.nobastion",
                                                      drop="bastion"))
    code, data, _ = run(lab, "plan", inventory=write_inventory(world["dir"] / "inv-nob.yml", doc))
    assert code == 1
    for r in data["hosts"]:
        assert r["status"] == "unreachable" and "bastion: unknown host key" in r["error"], r


def test_changed_host_key_is_refused_even_with_accept_new(lab: Lab, world: dict[str, Any]) -> None:
    doc = json.loads(json.dumps(world["doc"]))
    kh = _known_hosts(lab, world["dir"] / "known_hosts.changed", replace="gpu1")
    doc["defaults"]["known_hosts"] = str(kh)
    inv = write_inventory(world["dir"] / "inventory-changed.yml", doc)
    before = kh.read_text()
    code, data, _ = run(lab, "apply", "--yes", "--accept-new", inventory=inv)
    hosts = by_host(data)
    assert code == 1 and hosts["gpu2"]["status"] == "ok"
    assert hosts["gpu1"]["status"] == "unreachable" and "CHANGED" in hosts["gpu1"]["error"]
    assert hosts["gpu1"]["remote_execs"] == 0
    assert kh.read_text() == before


def test_a_booting_host_is_retried_and_the_recap_says_so(lab: Lab, world: dict[str, Any]) -> None:
    """pam_nologin refuses the login user while /run/nologin exists (a host still booting):
    the connection is retried with backoff, and the recap says what happened."""
    nologin = "System is booting up. Unprivileged users are not permitted to log in yet."
    since = lab.host("gpu2", "date", "+%s").stdout.strip()
    lab.host("gpu2", "sh", "-c", f"echo '{nologin}' > /run/nologin")
    done = threading.Event()

    def lift_after_a_refusal() -> None:
        # lifted once sshd has refused a login (not after a fixed delay: under load the
        # CLI's start-up alone can outlast one, and the first attempt would just succeed);
        # after 60 s regardless, so a missed log line cannot hang the test
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            log = lab.host("gpu2", "journalctl", "--since", f"@{since}", "-o", "cat",
                           check=False).stdout
            if "Access denied for user" in log or "nologin" in log:
                break
            done.wait(0.2)
        lab.host("gpu2", "rm", "-f", "/run/nologin")

    lifter = threading.Thread(target=lift_after_a_refusal)
    lifter.start()
    try:
        code, data, err = run(lab, "plan", "gpu2", inventory=world["inventory"])
    finally:
        done.set()
        lifter.join()
        lab.host("gpu2", "rm", "-f", "/run/nologin")
    r = by_host(data)["gpu2"]
    assert code == 0 and r["status"] in ("ok", "pending"), (r, err)
    assert r["retries"] >= 1 and "retried" in r["note"], r


def test_a_host_that_never_finishes_booting_is_unreachable_with_the_reason(
        lab: Lab, world: dict[str, Any]) -> None:
    lab.host("gpu2", "sh", "-c", "echo 'System is booting up.' > /run/nologin")
    try:
        # the same retries, given up on after 15 s instead of provision's 45 s window
        code, data, _ = lab.provision_json("plan", "gpu2", "-i", str(world["inventory"]),
                                           faults=("--retry-window", "15"))
    finally:
        lab.host("gpu2", "rm", "-f", "/run/nologin")
    r = by_host(data)["gpu2"]
    assert code == 1 and r["status"] == "unreachable", r
    assert "then gave up" in r["error"] and "retried" in r["error"], r
