"""Requests per second of a small JSON answer through the door vs straight to the service
(issue 36; docs/benchmarks.md#the-door). Loopback only: the service is a second HAProxy
that answers the JSON itself (`http-request return`: a Python server tops out near 500
requests/s on this machine and would measure only itself), the door is HAProxy with the
config `provision.door.render` makes,
its paths moved into a temporary directory and its limits raised out of the way; h2load
(nghttp2-client) with 64 concurrent keep-alive clients.

    .venv/bin/python bench/door_bench.py [-n REQUESTS]

Prints JSON: each run's requests/s and the door's ratio. Needs haproxy, openssl, h2load.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from provision.door import paths
from provision.door import render as R
from provision.inventory import load_inventory

KEY = "pk-bench-key"
BODY = b'{"model": "bench", "choices": [{"text": "ok"}]}'
INVENTORY = f"""version: 1
hosts:
  gpu1:
    address: 10.0.0.1
    ssh_from: [10.0.0.0/8]
    services:
      api:
        port: {{backend}}
        command: /opt/api/bin/serve
        expose: {{{{from: [0.0.0.0/0]}}}}
        https:
          name: api.example.org
          port: {{door}}
          keys: {{{{bench: "sha256:{hashlib.sha256(KEY.encode()).hexdigest()}"}}}}
          limits: {{{{per_key: 999999/s, per_address: 999999/s, connections: 10000}}}}
dns:
  zones:
    example.org: {{{{provider: route53}}}}
"""


SERVICE = """global
    maxconn 4096
defaults
    mode http
    timeout client 30s
    timeout connect 5s
    timeout server 30s
frontend service
    bind 127.0.0.1:{port}
    http-request return status 200 content-type application/json string '{body}'
"""


def h2load(args: list[str]) -> float:
    out = subprocess.run(["h2load", *args], capture_output=True, text=True, check=True).stdout
    m = re.search(r"finished in [0-9.]+m?s, ([0-9.]+) req/s", out)
    ok = re.search(r"status codes: (\d+) 2xx", out)
    assert m and ok and int(ok.group(1)) > 0, out
    return float(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20000)
    ap.add_argument("--backend", type=int, default=18100)
    ap.add_argument("--door", type=int, default=18543)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "service.cfg").write_text(SERVICE.format(port=a.backend, body=BODY.decode()))
        service = subprocess.Popen(["haproxy", "-f", str(t / "service.cfg")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (t / "inv.yml").write_text(INVENTORY.format(backend=a.backend, door=a.door))
        host = load_inventory(t / "inv.yml").hosts[0]
        (svc,) = R.doors(host)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", t / "k.pem", "-out", t / "c.pem", "-days", "2",
                        "-subj", "/CN=api.example.org"], check=True, capture_output=True)
        (t / "haproxy.pem").write_bytes((t / "c.pem").read_bytes() + (t / "k.pem").read_bytes())
        (t / "keys.map").write_text(R.keys_map(svc))
        config = (R.config(host).replace(paths.combined("api.example.org"), str(t / "haproxy.pem"))
                  .replace(R.map_path(svc), str(t / "keys.map")))
        if subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip() != "0":
            config = config.replace("    user haproxy\n", "").replace("    group haproxy\n", "")
        (t / "haproxy.cfg").write_text(config)
        proxy = subprocess.Popen(["haproxy", "-Ws", "-f", str(t / "haproxy.cfg")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1)
            common = ["-n", str(a.n), "-c", "64", "-t", "2"]
            auth = ["-H", f"Authorization: Bearer {KEY}"]
            direct = h2load([*common, "--h1", f"http://127.0.0.1:{a.backend}/"])
            door_h2 = h2load([*common, *auth, f"https://127.0.0.1:{a.door}/"])
            door_h1 = h2load([*common, *auth, "--h1", f"https://127.0.0.1:{a.door}/"])
        finally:
            for p in (proxy, service):
                p.terminate()
                p.wait()
    json.dump({"requests": a.n, "clients": 64, "direct_rps": direct, "door_h2_rps": door_h2,
               "door_h1_rps": door_h1, "door_h2_ratio": round(door_h2 / direct, 3),
               "door_h1_ratio": round(door_h1 / direct, 3)}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
