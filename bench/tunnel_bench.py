"""Measurements for bench/tunnel.sh; runs inside the lab's operator namespace.

For each method and round: start the tunnel, poll the local port with a small GET until the
first response byte arrives (= tunnel ready, from process start, CLI start-up included),
then download the big file with curl; stop the tunnel. Prints a table with ratios to
plain `ssh -L`.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import statistics
import subprocess
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def first_byte(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.settimeout(5)
            s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
            return bool(s.recv(1))
    except OSError:
        return False


def start(method: str, a: argparse.Namespace, port: int) -> subprocess.Popen[bytes]:
    if method == "ssh -L":
        # plain OpenSSH: ProxyJump through the bastion of the same config, to gpu1's address
        # (the config's gpu1 block would add its own LocalForwards)
        from provision.inventory import load_inventory

        inv = load_inventory(a.inventory)
        gpu1 = inv.node("gpu1")
        argv = ["ssh", "-F", a.ssh_config, "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
                "-o", f"UserKnownHostsFile={inv.known_hosts}", "-o", "StrictHostKeyChecking=yes",
                "-o", f"ProxyJump={','.join(gpu1.jump_chain)}", "-l", gpu1.user,
                "-i", str(gpu1.identity_file), "-N",
                "-L", f"127.0.0.1:{port}:127.0.0.1:{a.port}", gpu1.address]
    else:
        backend = method.split()[-1]
        argv = [a.provision, "tunnel", "-i", a.inventory, "gpu1", "bench-http", "--backend",
                backend, "--port", f"bench-http={port}", "--json"]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT if proc.args[0] != "ssh" else signal.SIGTERM)  # type: ignore[index]
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def reported_ready(proc: subprocess.Popen[bytes]) -> float | None:
    """`ready_seconds` from provision's JSON (connect time, without Python start-up)."""
    if proc.stdout is None or proc.args[0] == "ssh":  # type: ignore[index]
        return None
    fd, text, deadline = proc.stdout.fileno(), b"", time.monotonic() + 10
    while not text.endswith(b"\n}\n") and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.5)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            text += chunk
    try:
        return float(json.loads(text)["ready_seconds"])
    except (ValueError, KeyError):
        return None


def one(method: str, a: argparse.Namespace) -> tuple[float, float, float | None]:
    port = free_port()
    t0 = time.monotonic()
    proc = start(method, a, port)
    try:
        while not first_byte(port):
            if proc.poll() is not None:
                raise SystemExit(f"{method}: exited {proc.returncode} before it was ready")
            if time.monotonic() - t0 > 30:
                raise SystemExit(f"{method}: not ready after 30 s")
            time.sleep(0.005)
        ready = time.monotonic() - t0
        inner = reported_ready(proc)
        out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{size_download} %{time_total}",
                              f"http://127.0.0.1:{port}/blob"], capture_output=True, text=True,
                             check=True).stdout.split()
        size, secs = int(out[0]), float(out[1])
        if size != a.size_mb * 1048576:
            raise SystemExit(f"{method}: got {size} bytes, expected {a.size_mb} MiB")
        return ready, size / secs / 1e6, inner
    finally:
        stop(proc)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--inventory", required=True)
    p.add_argument("--ssh-config", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--size-mb", type=int, default=300)
    p.add_argument("--provision", default="provision")
    a = p.parse_args()
    methods = ["ssh -L", "provision openssh", "provision paramiko"]
    results: dict[str, list[tuple[float, float, float | None]]] = {m: [] for m in methods}
    for r in range(a.rounds):
        for m in methods:  # interleaved, so drift hits every method alike
            results[m].append(one(m, a))
            ready, mbps, inner = results[m][-1]
            print(f"round {r + 1} {m:<19} ready {ready:6.3f} s  {mbps:7.1f} MB/s"
                  + (f"  (connect {inner:.3f} s)" if inner is not None else ""), flush=True)
    base = statistics.median(x[1] for x in results["ssh -L"])
    print(f"\n{a.size_mb} MiB through bastion → gpu1 (127.0.0.1:{a.port}), median of {a.rounds}; "
          "ready = process start to first byte")
    print(f"{'method':<20} {'ready s':>8} {'connect s':>10} {'MB/s':>8} {'× ssh -L':>9}")
    for m in methods:
        ready = statistics.median(x[0] for x in results[m])
        inner_vals = [x[2] for x in results[m] if x[2] is not None]
        inner = f"{statistics.median(inner_vals):.3f}" if inner_vals else "-"
        mbps = statistics.median(x[1] for x in results[m])
        print(f"{m:<20} {ready:8.3f} {inner:>10} {mbps:8.1f} {mbps / base:9.2f}")


if __name__ == "__main__":
    main()
