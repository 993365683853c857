"""Cluster benchmark (not a test): what the hardened firewall costs training traffic.

Between two lab GPU hosts of cluster `train` (the lab's inventory), rounds interleaved:
  all-reduce  a Gloo all-reduce of a SIZE_MB float32 tensor, ITERS times after 2 warm-ups,
              launched with one `provision exec cluster:train` (Debian's python3-torch);
              algorithm bandwidth = size / time per all-reduce, as rank 0 measures it
  iperf3      gpu2 -> gpu1, 3 s of TCP, received Gb/s
each with the firewall provision installs (our chain hooked into INPUT) and with no firewall
at all (the jumps to our chain removed on both hosts, v4 and v6; put back after).

Goal: with the firewall within 5 % of without. Figures are medians of RUNS (default 5).
Usage: bench/cluster.py  (root; PROVISION_LAB_NAME picks the lab, default bench-cluster; it
       is brought up and bootstrapped when it is not up, and brought down again afterwards)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROV = str(ROOT / ".venv" / "bin" / "provision")
NAME = os.environ.setdefault("PROVISION_LAB_NAME", "bench-cluster")
RUNS = int(os.environ.get("RUNS", "5"))
SIZE_MB = int(os.environ.get("SIZE_MB", "64"))
ITERS = int(os.environ.get("ITERS", "10"))
MEMBERS = ("gpu1", "gpu2")

ALLREDUCE = f"""
import datetime, os, time
import torch, torch.distributed as dist
rank, world = int(os.environ["NODE_RANK"]), int(os.environ["NNODES"])
dist.init_process_group("gloo", init_method="tcp://%s:%s" % (os.environ["MASTER_ADDR"],
                        os.environ["MASTER_PORT"]), rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=120))
t = torch.ones({SIZE_MB} * 1024 * 1024 // 4)
for _ in range(2):
    dist.all_reduce(t)
dist.barrier()
start = time.perf_counter()
for _ in range({ITERS}):
    dist.all_reduce(t)
dist.barrier()
took = (time.perf_counter() - start) / {ITERS}
if rank == 0:
    print("algbw_MBps", round({SIZE_MB} / took, 1))
dist.destroy_process_group()
"""


def lab_up() -> bool:
    r = subprocess.run([PROV, "lab", "status", "--json"], capture_output=True, text=True)
    try:
        return bool(json.loads(r.stdout).get("up"))
    except json.JSONDecodeError:
        return False


def main() -> int:
    sys.path[0] = str(ROOT)  # not bench/: its dns.py would shadow dnspython
    from provision.lab import plan as P
    from provision.lab.state import container_leader, read_state

    started = not lab_up()
    if started:
        subprocess.run([PROV, "lab", "up"], check=True, capture_output=True)
    try:
        plan = P.plan_from_state(read_state(NAME))
        state = read_state(NAME)
        ns, inv = plan.operator.netns, plan.paths["inventory"]
        subprocess.run(["ip", "netns", "exec", ns, PROV, "apply", "--yes", "-i", inv,
                        "--playbook", "bootstrap-gpu-server"], check=True, capture_output=True)

        def host(name: str, *cmd: str) -> subprocess.CompletedProcess[str]:
            pid = container_leader(state["pids"][name])
            return subprocess.run(["nsenter", "-t", str(pid), "-a", "--", *cmd],
                                  capture_output=True, text=True)

        def firewall(on: bool) -> None:
            for h in MEMBERS:
                for tool in ("iptables", "ip6tables"):
                    if on:
                        host(h, tool, "-I", "INPUT", "1", "-j", "PROVISION-INPUT")
                    else:
                        while host(h, tool, "-D", "INPUT", "-j", "PROVISION-INPUT").returncode == 0:
                            pass

        def allreduce() -> float:
            r = subprocess.run(["ip", "netns", "exec", ns, PROV, "exec", f"cluster:{P.CLUSTER}",
                                "-i", inv, "--json", "--", "python3 -c " + _quote(ALLREDUCE)],
                               capture_output=True, text=True, timeout=600)
            data = json.loads(r.stdout)
            out = " ".join(h["stdout"] for h in data["hosts"])
            assert "algbw_MBps" in out, r.stdout + r.stderr
            return float(out.split("algbw_MBps", 1)[1].split()[0])

        def iperf() -> float:
            server = subprocess.Popen(["nsenter", "-t", str(container_leader(state["pids"]["gpu1"])),
                                       "-a", "--", "iperf3", "-s", "-1", "-p", "42000", "--forceflush"],
                                      stdout=subprocess.PIPE, text=True, start_new_session=True)
            assert server.stdout is not None
            while "Server listening" not in server.stdout.readline():
                pass
            r = host("gpu2", "iperf3", "-c", plan.address("gpu1"), "-p", "42000", "-t", "3", "-J")
            server.wait(timeout=30)
            return float(json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"]) / 1e9

        got: dict[tuple[str, bool], list[float]] = {}
        try:
            for _ in range(RUNS):
                for on in (True, False):
                    firewall(on) if not on else None
                    got.setdefault(("allreduce", on), []).append(allreduce())
                    got.setdefault(("iperf3", on), []).append(iperf())
                    if not on:
                        firewall(True)
        finally:
            firewall(False)
            firewall(True)
        print(f"cluster {P.CLUSTER}: gpu1 + gpu2, medians of {RUNS} interleaved rounds")
        for what, unit in (("allreduce", f"MB/s (Gloo, {SIZE_MB} MiB x {ITERS})"),
                           ("iperf3", "Gb/s (TCP, 3 s)")):
            fw = statistics.median(got[(what, True)])
            bare = statistics.median(got[(what, False)])
            print(f"  {what:<10} firewall {fw:9.2f}  none {bare:9.2f} {unit}  "
                  f"ratio {fw / bare:.3f} (goal >= 0.95)")
        return 0
    finally:
        if started:
            subprocess.run([PROV, "lab", "down"], capture_output=True)


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


if __name__ == "__main__":
    raise SystemExit(main())
