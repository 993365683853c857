"""`provision dns migrate run` on the lab's BIND + Unbound: how soon the resolver serves the
new value after ns1 does, and the whole run time. Printed, never asserted.

  .venv/bin/python bench/migrate.py --lab NAME [--runs 3] [--ttl 6] [--lower 2]

Each run: a fresh A record with TTL `--ttl`, the resolver primed with it, then
`provision dns migrate run --to <ns1's address> --lower-ttl LOWER --health tcp:53` in the
operator namespace while a poller asks ns1 (RD off) and the resolver every 20 ms.
"ns1 -> resolver" is from the first poll where ns1 answered the new value to the first
where the resolver did (goal: at most the lowered TTL + 1 s; TTLs are whole seconds).

Traffic goes to the lab's namespaces only. Needs root and a running lab.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# bench/dns.py sits beside this file: keep the folder off the path, or `import dns` finds it
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
PROVISION = str(ROOT / ".venv" / "bin" / "provision")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lab", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ttl", type=int, default=6)
    ap.add_argument("--lower", type=int, default=2)
    a = ap.parse_args()

    import yaml

    from provision.lab import plan as P
    from provision.lab.netns import in_netns
    from provision.lab.state import read_state

    state = read_state(a.lab)
    if state is None:
        print(f"migrate: lab {a.lab} is not up; skipped")
        return 0
    lab = P.plan_from_state(state)
    ns1, resolver = lab.address("ns1"), lab.address("resolver")
    op = ["ip", "netns", "exec", lab.operator.netns]
    delays, walls = [], []
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PROVISION_STATE_DIR": f"{tmp}/state"}
        for i in range(a.runs):
            short = f"bench{secrets.token_hex(3)}"
            fq = f"{short}.{P.ZONE}."
            old = f"10.{lab.octet}.1.{150 + i}"
            doc = yaml.safe_load(Path(lab.paths["inventory"]).read_text())
            doc["dns"]["zones"][P.ZONE]["records"][short] = {"type": "A", "values": [old], "ttl": a.ttl}
            inv = Path(tmp) / "inventory.yml"
            inv.write_text(yaml.safe_dump(doc))
            subprocess.run([*op, PROVISION, "dns", "apply", "-i", str(inv), "--yes"], check=True,
                           capture_output=True)
            seen: list[tuple[float, str, list[str]]] = []
            stop = threading.Event()

            def poll(fq: str, seen: list[tuple[float, str, list[str]]], stop: threading.Event) -> None:
                import dns.flags
                import dns.message
                import dns.query

                with in_netns(lab.operator.netns):
                    while not stop.is_set():
                        for who, addr, rd in (("ns1", ns1, False), ("resolver", resolver, True)):
                            q = dns.message.make_query(fq, "A")
                            if not rd:
                                q.flags &= ~dns.flags.RD
                            try:
                                r = dns.query.udp(q, addr, timeout=1)
                            except Exception:
                                continue
                            seen.append((time.monotonic(), who,
                                         sorted(x.to_text() for rr in r.answer for x in rr)))
                        time.sleep(0.02)

            th = threading.Thread(target=poll, args=(fq, seen, stop), daemon=True)
            th.start()
            time.sleep(0.2)  # primed: the resolver holds the old answer with TTL a.ttl
            t0 = time.monotonic()
            r = subprocess.run([*op, PROVISION, "dns", "migrate", "run", fq, "--to", ns1,
                                "--lower-ttl", str(a.lower), "--health", "tcp:53", "-i", str(inv),
                                "--json"], env=env, capture_output=True, text=True)
            wall = time.monotonic() - t0
            time.sleep(0.2)
            stop.set()
            th.join(5)
            subprocess.run([*op, PROVISION, "dns", "apply", "-i", lab.paths["inventory"], "--yes"],
                           capture_output=True)
            if r.returncode != 0:
                print(f"run {i + 1}: provision exited {r.returncode}: {r.stderr.strip()}")
                return 1
            data: dict[str, Any] = json.loads(r.stdout)
            t_ns1 = min(t for t, w, v in seen if w == "ns1" and v == [ns1])
            t_res = min(t for t, w, v in seen if w == "resolver" and v == [ns1])
            delays.append(t_res - t_ns1)
            walls.append(wall)
            print(f"run {i + 1}: ns1 -> resolver {t_res - t_ns1:.2f} s (lowered TTL {a.lower} s); "
                  f"whole run {wall:.2f} s (original TTL {a.ttl} s: lowered "
                  f"{data['timings'].get('lowered', 0):.2f}, switched {data['timings']['switched']:.2f}, "
                  f"verified {data['timings']['verified']:.2f}, finalized {data['timings']['finalized']:.2f})")
    print(f"migrate (lab BIND + Unbound, {a.runs} runs): ns1 -> resolver median "
          f"{statistics.median(delays):.2f} s, max {max(delays):.2f} s (goal <= {a.lower + 1} s); "
          f"whole run median {statistics.median(walls):.2f} s = original TTL {a.ttl} s + lowered "
          f"TTL {a.lower} s + {statistics.median(walls) - a.ttl - a.lower:.2f} s of work")
    return 0


if __name__ == "__main__":
    sys.exit(main())
