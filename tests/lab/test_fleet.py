"""A fleet at once: 16 GPU hosts behind one bastion, in a lab of their own.

A cold bootstrap converges every host (0 failed, 0 unreachable), a second run changes
nothing (one remote exec per host), and `--forks 2` never has more than 2 hosts in flight:
counted inside the CLI by tests/support/faults.py (`--count-in-flight`) and on the bastion
by sampling the SSH connections it carries to the hosts while the run goes on (a connection
counts as in flight beside others when two samples in a row saw them all: `_at_once`). Every host
rides on one shared connection to the bastion, and the bastion's sshd never saw a message
for a channel already closed (which makes it drop that shared connection).

The GPU hosts run the same Jupyter stand-in as test_converge (`python3 -m http.server`),
not the role's real Jupyter and TensorBoard: 16 real Jupyter servers would measure this
2-core machine, not provision. Runtime on a 2-core machine: see docs/benchmarks.md.
"""

from __future__ import annotations

import itertools
import json
import secrets
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.lab import plan as P

from .conftest import FAULTY, Lab, _load, provision, require_lab_prerequisites
from .conftest import PROVISION as PROVISION_CLI

pytestmark = pytest.mark.lab

GPUS = 16


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, Path]]:
    require_lab_prerequisites()
    name = f"fleet-{secrets.token_hex(3)}"
    try:
        provision("up", "--gpus", str(GPUS), name=name, timeout=600)
        lab = _load(name)
        doc = yaml.safe_load(lab.inventory.read_text())
        for h in doc["hosts"].values():
            h["roles"] = []
            h["services"] = {"notebook": {
                "port": 8888, "command": "/usr/bin/python3 -m http.server --bind {bind} {port}"}}
        doc.pop("roles", None)
        doc.pop("dns", None)
        inventory = tmp_path_factory.mktemp("fleet") / "inventory.yml"
        inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
        yield lab, inventory
    finally:
        provision("down", name=name, check=False, timeout=300)
        shutil.rmtree(f"{P.DATA_ROOT}/{name}", ignore_errors=True)


def _statuses(data: dict[str, Any]) -> dict[str, str]:
    return {h["host"]: h["status"] for h in data.get("hosts", [])}


def test_a_cold_bootstrap_of_16_hosts_converges_every_one(fleet: tuple[Lab, Path]) -> None:
    lab, inventory = fleet
    r, seen = _sampled(lab, f"( sport = :22 and dst {lab.addr('operator')} )", [
        "ip", "netns", "exec", lab.plan.operator.netns, *PROVISION_CLI, "apply", "--yes", "-i",
        str(inventory), "--json"])
    data = json.loads(r.stdout) if r.stdout.strip() else {}
    statuses = _statuses(data)
    bad = {h["host"]: (h["status"], h["error"]) for h in data.get("hosts", [])
           if h["status"] in ("failed", "unreachable")}
    assert r.returncode == 0 and not bad, r.stderr[-2000:] + json.dumps(bad, indent=1)
    assert len(statuses) == GPUS + 1 and set(statuses.values()) == {"changed"}, statuses
    assert data["control"]["hosts"] == GPUS + 1
    # 17 commit-confirmed hosts, and never more than 3 connections into the bastion: the hop
    # the GPU hosts share (their confirmations too), the bastion's own session, and the new
    # login that confirms the bastion's own change
    assert any(h["actions"] and any("confirm" in a["type"].lower() for a in h["actions"])
               for h in data["hosts"]), data["hosts"][0]["actions"]
    assert seen and max(seen) <= 3, seen


def test_a_second_run_changes_nothing(fleet: tuple[Lab, Path]) -> None:
    lab, inventory = fleet
    code, data, err = lab.provision_json("apply", "--yes", "-i", str(inventory), timeout=600)
    assert code == 0, err[-2000:]
    assert set(_statuses(data).values()) == {"ok"}, _statuses(data)
    assert all(h["remote_execs"] == 1 and h["changes"] == 0 for h in data["hosts"])


def _bastion_connections(lab: Lab, which: str) -> frozenset[str]:
    """Established TCP connections on the bastion (local and peer address): `( sport = :22 )`
    into its sshd, or `( dport = :22 )` out of it to the hosts (one per host whose chain it
    carries)."""
    r = subprocess.run(["ip", "netns", "exec", lab.plan.node("bastion").netns, "ss", "-Htn",
                        "state", "established", which],
                       capture_output=True, text=True, timeout=10, check=True)
    return frozenset(" ".join(ln.split()[-2:]) for ln in r.stdout.splitlines() if ln.strip())


def _at_once(samples: list[frozenset[str]]) -> list[int]:
    """For each pair of consecutive samples, how many connections were established at one
    instant: those seen in both. One `ss` sample is no snapshot: it walks the kernel's
    connection table bucket by bucket, and on this loaded 2-core machine a walk takes up
    to 70 ms, long enough to list a connection the bastion shut after its bucket was read
    beside one that opened later. A connection seen in two samples was established from
    the first through the second (a connection is established once), so all of those were
    established at once in the gap between them."""
    return [len(a & b) for a, b in itertools.pairwise(samples)]


def _sampled(lab: Lab, which: str, argv: list[str]) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    """Run `argv` while sampling the bastion's connections every 20 ms; how many were
    established at once, pair of samples by pair (`_at_once`)."""
    seen: list[frozenset[str]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            seen.append(_bastion_connections(lab, which))
            stop.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    finally:
        stop.set()
        sampler.join()
    return r, _at_once(seen)


def test_forks_2_never_has_more_than_2_hosts_in_flight(
        fleet: tuple[Lab, Path], tmp_path: Path) -> None:
    lab, inventory = fleet
    count = tmp_path / "in-flight.json"
    r, seen = _sampled(lab, "( dport = :22 )", [
        "ip", "netns", "exec", lab.plan.operator.netns, *FAULTY, "--count-in-flight", str(count),
        "--", "plan", "-i", str(inventory), "--forks", "2", "--json"])
    assert r.returncode == 0, r.stderr[-2000:]
    data = json.loads(r.stdout)
    assert len(data["hosts"]) == GPUS + 1 and data["control"]["forks"] == 2
    assert json.loads(count.read_text())["most"] == 2  # 17 hosts: the cap is reached, never passed
    # the sampler sees the 2 in flight at once (so it could see a third), never more
    assert seen and max(seen) == 2, (max(seen, default=None), [(i, n) for i, n in enumerate(seen) if n > 2])


def test_every_host_rides_on_one_connection_to_the_bastion(fleet: tuple[Lab, Path]) -> None:
    lab, inventory = fleet
    into = lab.addr("operator")
    r, seen = _sampled(lab, f"( sport = :22 and dst {into} )", [
        "ip", "netns", "exec", lab.plan.operator.netns, *PROVISION_CLI, "plan", "-i",
        str(inventory), "--json"])
    assert r.returncode == 0, r.stderr[-2000:]
    assert {h["status"] for h in json.loads(r.stdout)["hosts"]} == {"ok"}
    # the bastion as a host of its own, and the one hop that all 16 GPU hosts share
    assert seen and max(seen) <= 2, seen
    journal = lab.host("bastion", "journalctl", "--no-pager", "-t", "sshd", "-o", "cat").stdout
    assert "nonexistent channel" not in journal


# --- provision exec and the Fabric API on the same fleet (no extra boot) -------------------
# These run after the converge tests above (they need no converged host: the login user
# and its sudo are the lab's own). The stopped-host test restarts sshd when done.

def _exec(lab: Lab, inventory: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """`provision exec --json ARGS` in the operator namespace (--json before the command)."""
    r = lab.op(*PROVISION_CLI, "exec", "-i", str(inventory), "--json", *args, check=False,
               timeout=240)
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else {}, r.stderr


def _by_host(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["host"]: h for h in data.get("hosts", [])}


def test_exec_runs_everywhere_and_a_stopped_host_fails_only_itself(fleet: tuple[Lab, Path]) -> None:
    """As the login user, every host but the stopped one answers; the recap names it; exit 1."""
    lab, inventory = fleet
    stopped = f"gpu{GPUS}"
    login = yaml.safe_load(inventory.read_text())["defaults"]["user"]
    assert login != "root"
    lab.host(stopped, "systemctl", "stop", "ssh.socket", "ssh.service", check=False)
    try:
        code, data, err = _exec(lab, inventory, "all,bastions", "--",
                                "hostname; id -un; echo to-stderr >&2")
        hosts = _by_host(data)
        assert code == 1, err[-2000:]
        assert len(hosts) == GPUS + 1
        assert hosts[stopped]["status"] == "unreachable" and hosts[stopped]["error"], hosts[stopped]
        ok = {n: h for n, h in hosts.items() if n != stopped}
        assert all(h["status"] == "ok" and h["exit_status"] == 0 for h in ok.values()), ok
        # each host's own output, stdout and stderr apart, as the login user
        assert all(h["stdout"] == f"{n}\n{login}\n" and h["stderr"] == "to-stderr\n"
                   for n, h in ok.items()), ok
        # the text recap names the stopped host as unreachable, says what it cut, exits 1
        r = lab.op(*PROVISION_CLI, "exec", "-i", str(inventory), "all", "--max-output", "1000",
                   "--", "head -c 3000 /dev/zero | tr '\\0' a", check=False)
        assert r.returncode == 1, r.stderr[-2000:]
        row = [ln for ln in r.stdout.splitlines() if f" {stopped} " in ln]
        assert row and "unreachable" in row[0], r.stdout
        assert r.stdout.count("[stdout cut at 1000 bytes: 3000 bytes in all]") == GPUS - 1, r.stdout
        assert "stdout cut at 1000 of 3000 bytes" in r.stdout  # the recap's note
    finally:
        lab.host(stopped, "systemctl", "start", "ssh.service", check=False)


def test_exec_sudo_runs_as_root_and_output_over_the_cap_is_cut(fleet: tuple[Lab, Path]) -> None:
    lab, inventory = fleet
    code, data, err = _exec(lab, inventory, "gpu1,gpu2", "--sudo", "--max-output", "1000", "--",
                            "id -un; head -c 300000 /dev/zero | tr '\\0' a; echo done >&2")
    assert code == 0, err[-2000:]
    assert len(data["hosts"]) == 2
    for h in data["hosts"]:
        assert h["stdout"] == "root\n" + "a" * 995, h["stdout"][:80]
        assert h["stdout_bytes"] == 300005 and h["stdout_truncated"]
        assert h["stderr"] == "done\n" and not h["stderr_truncated"]


def _marked(lab: Lab, host: str, marker: str) -> list[str]:
    ps = lab.host(host, "ps", "-eo", "pid,user,args").stdout
    return [ln for ln in ps.splitlines() if marker in ln and "ps -eo" not in ln]


def test_ctrl_c_stops_the_command_on_every_host(fleet: tuple[Lab, Path]) -> None:
    """SIGINT mid-run: every host's command (run under sudo, so root's processes) is gone
    from the host afterwards, checked with ps on each of them."""
    import signal
    import time

    lab, inventory = fleet
    marker = f"sleep 6{secrets.randbelow(100):02d}"
    names = [f"gpu{i}" for i in range(1, GPUS + 1)]
    proc = subprocess.Popen(["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION_CLI, "exec",
                             "-i", str(inventory), "all", "--sudo", "--json", "--", f"{marker}; echo late"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not all(_marked(lab, n, marker) for n in names):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the command did not start on every host"
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    data = json.loads(out)
    assert data["interrupted"] and {h["status"] for h in data["hosts"]} == {"interrupted"}
    assert not any("late" in h["stdout"] for h in data["hosts"])
    left = {n: _marked(lab, n, marker) for n in names}
    assert not any(left.values()), left


def test_the_fabfile_example_runs_under_fab_through_the_bastion(fleet: tuple[Lab, Path],
                                                                 tmp_path: Path) -> None:
    import sys

    lab, inventory = fleet
    fab = str(Path(sys.executable).parent / "fab")
    examples = str(Path(__file__).resolve().parents[2] / "examples")
    r = lab.op(fab, "-r", examples, "uptime", "--inventory", str(inventory), "--hosts", "gpu1,gpu2,bastions",
               check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = dict(ln.split(": ", 1) for ln in r.stdout.splitlines())
    assert set(lines) == {"gpu1", "gpu2", "bastion"} and all("load average" in v for v in lines.values())
    r = lab.op(fab, "-r", examples, "whoami", "--inventory", str(inventory), "--hosts", "gpu3")
    assert r.stdout.strip().endswith("(sudo: root)"), r.stdout
    # the same trust path as apply: an empty known_hosts refuses the bastion's key
    doc = yaml.safe_load(inventory.read_text())
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    doc["defaults"]["known_hosts"] = str(empty)
    untrusted = tmp_path / "inventory.yml"
    untrusted.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = lab.op(fab, "-r", examples, "whoami", "--inventory", str(untrusted), "--hosts", "gpu1",
               check=False)
    assert r.returncode != 0 and "unknown host key" in r.stdout + r.stderr, r.stdout + r.stderr
