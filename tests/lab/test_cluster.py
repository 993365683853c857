"""A training cluster on hardened lab hosts (issue 35): gpu1 and gpu2 train together
(`clusters: train` in the lab's inventory), behind the firewall provision installs.

- A real `torch.distributed` all-reduce over Gloo (Debian's python3-torch), launched with
  one `provision exec cluster:train`, gets the right sum through the firewall.
- Each member gets its own NODE_RANK and the interface that holds its address; the kernel
  runs the cluster's ephemeral port range.
- Nobody else gains anything: the bastion (not a member) reaches neither the rendezvous nor
  an ephemeral port, and a Gloo rank on it never joins.
- Ctrl-C stops the job on every member.
- With the cluster removed from the inventory, the next apply closes it again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.lab import plan as P

from .conftest import PROVISION, Lab

pytestmark = pytest.mark.lab

PLAYBOOK = "name: cluster\nhosts: [all]\nsteps: [cluster, firewall]\n"
MEMBERS = ("gpu1", "gpu2")

# one rank of a Gloo all-reduce: rank r contributes r + 1; every rank prints the sum
ALLREDUCE = """
import datetime, os, sys
import torch, torch.distributed as dist
rank, world = int(os.environ["NODE_RANK"]), int(os.environ["NNODES"])
dist.init_process_group("gloo", init_method="tcp://%s:%s" % (os.environ["MASTER_ADDR"],
                        os.environ["MASTER_PORT"]), rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=float(sys.argv[1])))
t = torch.tensor([float(rank + 1)] * 4)
dist.all_reduce(t)
print("sum", t.tolist(), "rank", rank, "of", world, os.environ["GLOO_SOCKET_IFNAME"])
dist.destroy_process_group()
"""

# listen on PORT (on every address) until killed: what a peer connects to; port 0 is one
# the kernel picks from the ephemeral range, as NCCL and Gloo get theirs (a fixed port in
# that range may be held at that moment by any recent connection of the host's own)
LISTEN = ("import socket, sys, time; s = socket.socket(socket.AF_INET6); "
          "s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0); "
          "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
          "s.bind(('::', int(sys.argv[1]))); s.listen(16); "
          "print('ready', s.getsockname()[1], flush=True); time.sleep(600)")
# connect to HOST PORT: exit 0 when it connects, 1 when refused or dropped (3 s)
CONNECT = ("import socket, sys\ntry:\n socket.create_connection((sys.argv[1], int(sys.argv[2])),"
           " timeout=3).close()\nexcept OSError as e:\n print(type(e).__name__); sys.exit(1)")


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def _apply(lab: Lab, inventory: Path, playbook: Path) -> dict[str, Any]:
    code, data, err = lab.provision_json("apply", "--yes", "--playbook", str(playbook),
                                         "-i", str(inventory), timeout=300)
    assert code == 0, err + json.dumps(data, indent=1)
    return data


@pytest.fixture(scope="module")
def cluster(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    if len(lab.plan.gpu_hosts) < 2:
        pytest.skip("the lab has one GPU host: a cluster needs two")
    d = tmp_path_factory.mktemp("cluster")
    (d / "playbook.yml").write_text(PLAYBOOK)
    doc = yaml.safe_load(lab.inventory.read_text())
    doc.pop("dns", None)
    doc["roles"]["gpu-server"].pop("services", None)
    for h in doc["hosts"].values():  # gpu1's model API (its door needs the zone): not here
        h.pop("services", None)
    assert doc["clusters"][P.CLUSTER]["hosts"] == list(MEMBERS)
    (d / "with.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    doc.pop("clusters")
    (d / "without.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    _apply(lab, d / "with.yml", d / "playbook.yml")
    yield {"dir": d, "with": d / "with.yml", "without": d / "without.yml",
           "playbook": d / "playbook.yml"}
    for h in MEMBERS:
        lab.host(h, "sh", "-c", "pkill -f provision-cluster-test; true", check=False)


def _exec(lab: Lab, inventory: Path, command: str, *opts: str,
          timeout: float = 120) -> tuple[int, dict[str, Any], str]:
    """`provision exec cluster:train OPTS --json -- COMMAND` from the operator's namespace."""
    r = lab.op(*PROVISION, "exec", f"cluster:{P.CLUSTER}", "-i", str(inventory), *opts,
               "--json", "--", command, check=False, timeout=timeout)
    try:
        data = json.loads(r.stdout)
    except json.JSONDecodeError:
        data = {}
    return r.returncode, data, r.stderr


def _listen(lab: Lab, host: str, port: int, procs: list[subprocess.Popen[str]]) -> int:
    """A listener on `host` (nsenter into it), started and ready, added to `procs` (which
    the caller stops, whatever happens); returns its port (the kernel's pick for 0)."""
    proc = subprocess.Popen(["nsenter", "-t", str(lab.leader(host)), "-a", "--", "python3",
                             "-c", LISTEN, str(port)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)  # nsenter forks: stop its whole group
    procs.append(proc)
    assert proc.stdout is not None
    said = proc.stdout.readline().split()
    assert said[:1] == ["ready"], said
    return int(said[1])


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def _connects(lab: Lab, src: str, dst: str, port: int) -> bool:
    r = lab.host(src, "python3", "-c", CONNECT, lab.addr(dst), str(port), check=False)
    return r.returncode == 0


def test_the_kernel_runs_the_clusters_ephemeral_range_and_each_member_its_environment(
        lab: Lab, cluster: dict[str, Path]) -> None:
    lo, hi = P.EPHEMERAL_PORTS
    for h in MEMBERS:
        got = lab.host(h, "sysctl", "-n", "net.ipv4.ip_local_port_range").stdout.split()
        assert got == [str(lo), str(hi)], (h, got)
    code, data, err = _exec(lab, cluster["with"],
                            "echo $NODE_RANK $NNODES $MASTER_ADDR $MASTER_PORT "
                            "$GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME")
    assert code == 0, err + json.dumps(data)
    got = {h["host"]: h["stdout"].split() for h in data["hosts"]}
    master = lab.addr("gpu1")
    for rank, h in enumerate(MEMBERS):
        iface = lab.host(h, "ip", "-o", "addr", "show", "to", lab.addr(h)).stdout.split()[1]
        assert got[h] == [str(rank), "2", master, "29500", iface, f"={iface}"], got


def test_a_gloo_all_reduce_between_the_members_through_the_firewall(
        lab: Lab, cluster: dict[str, Path]) -> None:
    """One command starts both ranks; each prints the sum of 1 and 2."""
    for h in MEMBERS:  # the hardened firewall is live: our chain hooked in, drop at the end
        rules = lab.host(h, "iptables", "-S", "PROVISION-INPUT").stdout
        assert "-A PROVISION-INPUT -j DROP" in rules.replace(' -m comment --comment "everything else"', "")
    code, data, err = _exec(lab, cluster["with"], f"python3 -c {_quote(ALLREDUCE)} 60",
                            "--timeout", "120", timeout=180)
    assert code == 0, err + json.dumps(data, indent=1)
    for rank, h in enumerate(sorted(data["hosts"], key=lambda x: x["host"])):
        assert h["stdout"].split()[:8] == ["sum", "[3.0,", "3.0,", "3.0,", "3.0]", "rank",
                                           str(rank), "of"], h


def test_nobody_else_gains_anything(lab: Lab, cluster: dict[str, Path]) -> None:
    """gpu1 listens on the rendezvous port and on an ephemeral port: gpu2 connects to both,
    the bastion (on the same private segment, not a member) to neither."""
    procs: list[subprocess.Popen[str]] = []
    try:
        ephemeral = _listen(lab, "gpu1", 0, procs)
        assert P.EPHEMERAL_PORTS[0] <= ephemeral <= P.EPHEMERAL_PORTS[1], ephemeral
        for port in (_listen(lab, "gpu1", 29500, procs), ephemeral):
            assert _connects(lab, "gpu2", "gpu1", port), port
            assert not _connects(lab, "bastion", "gpu1", port), port
    finally:
        _stop(procs)


def test_a_rank_on_a_non_member_never_joins(lab: Lab, cluster: dict[str, Path]) -> None:
    """Rank 0 on gpu1, rank 1 on the bastion: the bastion's rank cannot reach the
    rendezvous and fails (Gloo's own timeout), and so does gpu1's, waiting for it."""
    env = f"NODE_RANK=1 NNODES=2 MASTER_ADDR={lab.addr('gpu1')} MASTER_PORT=29500 " \
          "GLOO_SOCKET_IFNAME=eth1"
    master = subprocess.Popen(
        ["nsenter", "-t", str(lab.leader("gpu1")), "-a", "--", "sh", "-c",
         f"set -a; . /etc/provision/clusters/{P.CLUSTER}.env; set +a; NNODES=2; "
         f"exec python3 -c {_quote(ALLREDUCE)} 15"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        r = lab.host("bastion", "sh", "-c", f"env {env} python3 -c {_quote(ALLREDUCE)} 15",
                     check=False, timeout=120)
        assert r.returncode != 0 and "sum" not in r.stdout, r.stdout + r.stderr
    finally:
        out, errs = master.communicate(timeout=120)
    assert master.returncode != 0 and "sum" not in out, out + errs
    # it failed waiting for its peer, not because something else held the rendezvous port
    assert "Address already in use" not in errs, errs


def test_ctrl_c_stops_the_job_on_every_member(lab: Lab, cluster: dict[str, Path]) -> None:
    marker = "provision-cluster-test"
    proc = subprocess.Popen(
        ["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, "exec",
         f"cluster:{P.CLUSTER}", "-i", str(cluster["with"]), "--",
         f"exec -a {marker} sleep 300"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        deadline = time.monotonic() + 60
        running: set[str] = set()
        while running != set(MEMBERS) and time.monotonic() < deadline and proc.poll() is None:
            running = {h for h in MEMBERS if lab.host(h, "pgrep", "-f", marker,
                                                      check=False).returncode == 0}
            time.sleep(0.2)
        assert running == set(MEMBERS), (running, proc.poll())
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out + err
    for h in MEMBERS:
        assert lab.host(h, "pgrep", "-f", marker, check=False).returncode == 1, h


def test_without_the_cluster_the_next_apply_closes_it(lab: Lab, cluster: dict[str, Path]) -> None:
    procs: list[subprocess.Popen[str]] = []
    try:
        _listen(lab, "gpu1", 29500, procs)
        assert _connects(lab, "gpu2", "gpu1", 29500)
        _apply(lab, cluster["without"], cluster["playbook"])
        assert not _connects(lab, "gpu2", "gpu1", 29500)
        assert lab.host("gpu1", "sysctl", "-n", "net.ipv4.ip_local_port_range"
                        ).stdout.split() == ["32768", "60999"]
        assert lab.host("gpu1", "test", "-e", f"/etc/provision/clusters/{P.CLUSTER}.env",
                        check=False).returncode == 1
        _apply(lab, cluster["with"], cluster["playbook"])  # and back, for the other tests
        assert _connects(lab, "gpu2", "gpu1", 29500)
    finally:
        _stop(procs)


def test_a_rule_before_ours_dropping_a_peer_fails_the_apply_naming_it(
        lab: Lab, cluster: dict[str, Path]) -> None:
    """Another tool's DROP of gpu2 before our jump on gpu1: the cluster would hang, so the
    apply fails (and rolls back) naming that rule and the peer, instead of "no changes"."""
    rule = ["INPUT", "-s", f"{lab.addr('gpu2')}/32", "-j", "DROP"]
    lab.host("gpu1", "iptables", "-I", *rule[:1], "1", *rule[1:])
    try:
        code, data, err = lab.provision_json("apply", "gpu1", "--yes", "--playbook",
                                             str(cluster["playbook"]), "-i", str(cluster["with"]))
        text = json.dumps(data)
        assert code == 1, err + text
        assert f"-A INPUT -s {lab.addr('gpu2')}/32 -j DROP" in text and "cluster train: gpu2" in text, text
    finally:
        lab.host("gpu1", "iptables", "-D", *rule)
    _apply(lab, cluster["with"], cluster["playbook"])


def test_audit_cluster_measures_every_pair_and_shuts_out_the_bastion(
        lab: Lab, cluster: dict[str, Path]) -> None:
    """`audit --cluster train`: gpu1 <-> gpu2 open on the rendezvous and an ephemeral port,
    with a bandwidth and a round-trip time; the bastion closed on both, for both; the heat
    map written."""
    png = cluster["dir"] / "train.png"
    code, data, err = lab.provision_json("audit", "--cluster", P.CLUSTER, "-i",
                                         str(cluster["with"]), "--seconds", "1",
                                         "--plot", str(png))
    assert code == 0 and data["ok"], err + json.dumps(data, indent=1)
    by = {(r["from"], r["to"], r["kind"]): r for r in data["results"]}
    for a, b in (("gpu1", "gpu2"), ("gpu2", "gpu1")):
        assert by[(a, b, "rendezvous")]["reach"] == "open"
        eph = by[(a, b, "ephemeral")]
        assert eph["reach"] == "open" and eph["gbps"] > 0 and eph["rtt_ms"] > 0, eph
        assert P.EPHEMERAL_PORTS[0] <= eph["port"] <= P.EPHEMERAL_PORTS[1]
    for b in MEMBERS:
        for kind in ("rendezvous", "ephemeral"):
            r = by[("bastion", b, kind)]
            assert r["reach"] == "closed" and r["ok"], r
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # and a hole shows: gpu2's peer rule for gpu1 removed by hand -> gpu1 -> gpu2 FAILs
    lab.host("gpu2", "sh", "-c", "iptables -S PROVISION-INPUT | grep 'cluster train: gpu1' | "
             "sed 's/^-A/-D/' | while read -r r; do eval iptables $r; done")
    try:
        code, data, err = lab.provision_json("audit", "--cluster", P.CLUSTER, "-i",
                                             str(cluster["with"]), "--seconds", "0.5")
        assert code == 1 and not data["ok"], err
        assert any(f.startswith("gpu1 -> gpu2") and "closed, should be open" in f
                   for f in data["failures"]), data["failures"]
    finally:
        _apply(lab, cluster["with"], cluster["playbook"])


def test_a_no_op_apply_of_a_member_is_one_remote_command(lab: Lab, cluster: dict[str, Path]) -> None:
    data = _apply(lab, cluster["with"], cluster["playbook"])
    for h in data["hosts"]:
        if h["host"] in MEMBERS:
            assert (h["status"], h["changed"], h["remote_execs"]) == ("ok", 0, 1), h
