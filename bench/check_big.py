"""`provision check` of a large inventory (not a test): N hosts (default 10,000) behind one
bastion, each naming the gpu-server role (Jupyter + TensorBoard) and a few of their own
fields; median wall time of RUNS whole `provision check` processes. Goal: <= 3 s.
Usage: .venv/bin/python bench/check_big.py [N] [RUNS]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def inventory(n: int) -> str:
    lines = ["version: 1", "defaults: {user: ubuntu}",
             "team:", "  alice: {keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGibXQ/vWDsbmYX4HRXjPsxSSPT+hK2MLkdwFeCLa/LU alice@x'], sudo: true}",
             "bastions:", "  jump: {address: 203.0.113.10, allow_ssh_from: [198.51.100.0/24]}",
             "roles:", "  gpu-server:",
             "    services: {jupyter: {}, tensorboard: {logdir: /srv/runs}}",
             "    packages: [nvtop]",
             "hosts:"]
    for i in range(n):
        lines += [f"  gpu{i}:", f"    address: 10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}",
                  "    via: jump", "    roles: [gpu-server]", "    ssh_from: [10.0.0.0/8]"]
    return "\n".join(lines) + "\n"


def main(n: int, runs: int) -> None:
    provision = Path(sys.executable).with_name("provision")
    with tempfile.TemporaryDirectory() as d:
        inv = Path(d) / "inventory.yml"
        inv.write_text(inventory(n))
        size = inv.stat().st_size
        times = []
        for _ in range(runs):
            t = time.monotonic()
            r = subprocess.run([str(provision), "check", "-i", str(inv)], capture_output=True, text=True)
            times.append(time.monotonic() - t)
            if r.returncode not in (0, 1):
                sys.exit(f"check exited {r.returncode}: {r.stderr[-500:]}")
    med = statistics.median(times)
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"check of {n} hosts ({size} bytes): "
          f"{' '.join(f'{t:.2f}' for t in times)} s -> median {med:.2f} s "
          f"(goal <= 3 s: {'met' if med <= 3 else 'MISSED'}); load {' '.join(load)}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000, int(sys.argv[2]) if len(sys.argv) > 2 else 3)
