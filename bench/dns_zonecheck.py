"""`provision dns check --zone` of a 5,000-record zone against real servers on loopback.

  sudo .venv/bin/python bench/dns_zonecheck.py [--records 5000] [--runs 3]

Two BIND `named` (authoritative, the same zone file, both in the zone's NS set) on
127.0.25.1 and 127.0.25.2 and one Unbound resolver (stub zone to the first) on
127.0.25.3, all started here as root, in a network namespace of their own (BIND
listens only on addresses an interface has: they are added to that namespace's
loopback, not the machine's), and stopped at the end. Timed: the whole
`provision dns check --zone` process (median of --runs; each run asks the resolver
again, from its cache after the first), and its own query time and rate from --json.
Then the same questions in-process through zonequery.ask_all (a thread pool) at
several bounds on the queries in flight, and through dnspython's asyncio queries with
the same bounds: the measurement behind zonequery's choice of threads. Printed, never asserted. Traffic stays on that namespace's loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# bench/dns.py is in this folder: keep the folder off the path, or `import dns` finds it
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

import dns.asyncquery  # noqa: E402
import dns.exception  # noqa: E402
import yaml  # noqa: E402

from provision.dns import propagation as prop  # noqa: E402
from provision.dns.rrset import rrset  # noqa: E402
from provision.dns.zonecheck import questions  # noqa: E402
from provision.dns.zonequery import ask_all  # noqa: E402

ZONE = "zonecheck.test"
NS = ("127.0.25.1", "127.0.25.2")
RESOLVER = "127.0.25.3"
PROVISION = str(ROOT / ".venv" / "bin" / "provision")


def _ip(i: int) -> str:
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255 or 1}"


def zone_file(n: int) -> str:
    lines = [f"$ORIGIN {ZONE}.", "$TTL 300",
             f"@ 300 IN SOA ns1.{ZONE}. hostmaster.{ZONE}. ( 1 3600 600 86400 5 )",
             f"@ 300 IN NS ns1.{ZONE}.", f"@ 300 IN NS ns2.{ZONE}.",
             f"ns1 300 IN A {NS[0]}", f"ns2 300 IN A {NS[1]}"]
    lines += [f"h{i:05d} 300 IN A {_ip(i)}" for i in range(n)]
    return "\n".join(lines) + "\n"


def named_conf(d: Path, addr: str, zone: Path) -> str:
    return f"""options {{
  directory "{d}"; pid-file "{d}/named.pid"; session-keyfile "{d}/session.key";
  managed-keys-directory "{d}"; listen-on port 53 {{ {addr}; }}; listen-on-v6 {{ none; }};
  recursion no; allow-query {{ any; }}; allow-transfer {{ none; }}; notify no;
  dnssec-validation no;
}};
controls {{ }};
zone "{ZONE}" {{ type primary; file "{zone}"; }};
"""


def unbound_conf(d: Path) -> str:
    return f"""server:
  verbosity: 0
  use-syslog: no
  logfile: "{d}/unbound.log"
  chroot: ""
  username: ""
  directory: "{d}"
  pidfile: "{d}/unbound.pid"
  interface: {RESOLVER}
  port: 53
  do-ip6: no
  access-control: 127.0.0.0/8 allow
  do-not-query-localhost: no
  module-config: "iterator"
  cache-min-ttl: 0
  num-threads: 1
  local-zone: "." refuse
  local-zone: "{ZONE}." transparent
  domain-insecure: "{ZONE}."
  private-domain: "{ZONE}."
stub-zone:
  name: "{ZONE}."
  stub-addr: {NS[0]}
remote-control:
  control-enable: no
"""


def ask_async(qs: list[tuple[prop.Target, str, str]], bound: int) -> list[prop.Answer]:
    """The questions through dnspython's asyncio queries, at most `bound` in flight."""
    async def run() -> list[prop.Answer]:
        gate = asyncio.Semaphore(bound)

        async def one(t: prop.Target, name: str, rtype: str) -> prop.Answer:
            async with gate:
                try:
                    r = await dns.asyncquery.udp(prop.question(t, name, rtype), t.address,
                                                 port=t.port, timeout=2.0)
                except (OSError, dns.exception.DNSException) as e:  # counted as unanswered
                    return prop.Answer(t, "ERROR", error=str(e))
                return prop.parse_response(t, r, name, rtype)

        return await asyncio.gather(*(one(*q) for q in qs))

    return asyncio.run(run())


def wait_serving(addr: str, n: int, timeout: float = 30.0) -> None:
    t = prop.Target(addr, addr, "authoritative")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        a = prop.query(t, f"h{n - 1:05d}.{ZONE}.", "A", timeout=0.5)
        if a.status == "NOERROR":
            return
        time.sleep(0.1)
    raise SystemExit(f"{addr}: named does not serve the zone after {timeout:g} s")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-compare", action="store_true",
                    help="only the CLI runs, not the threads/asyncio comparison")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("named") or not shutil.which("unbound"):
        print("dns_zonecheck: needs root, named and unbound: skipped")
        return 0
    if not args.inside:
        netns = f"bench-zonecheck-{os.getpid()}"
        subprocess.run(["ip", "netns", "add", netns], check=True)
        try:
            return subprocess.run(["ip", "netns", "exec", netns, sys.executable, __file__,
                                   "--inside", "--records", str(args.records),
                                   "--runs", str(args.runs),
                                   *(["--no-compare"] if args.no_compare else [])]).returncode
        finally:
            subprocess.run(["ip", "netns", "del", netns], check=False)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for addr in (*NS, RESOLVER):
        subprocess.run(["ip", "addr", "add", f"{addr}/32", "dev", "lo"], check=True)
    n = args.records
    d = Path(tempfile.mkdtemp(prefix="bench-zonecheck-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        zf = d / "db.zone"
        zf.write_text(zone_file(n))
        key = d / "tsig.key"
        key.write_text(subprocess.run(["tsig-keygen", "bench-key"], check=True,
                                      capture_output=True, text=True).stdout)
        for i, addr in enumerate(NS):
            nd = d / f"ns{i + 1}"
            nd.mkdir()
            (nd / "named.conf").write_text(named_conf(nd, addr, zf))
            procs.append(subprocess.Popen(["named", "-g", "-c", str(nd / "named.conf")],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        (d / "unbound.conf").write_text(unbound_conf(d))
        procs.append(subprocess.Popen(["unbound", "-d", "-c", str(d / "unbound.conf")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for addr in NS:
            wait_serving(addr, n)
        inv = d / "inventory.yml"
        inv.write_text(yaml.safe_dump({"version": 1, "hosts": {}, "dns": {"resolvers": [RESOLVER], "zones": {
            ZONE: {"provider": "rfc2136", "server": NS[0], "tsig_key_file": str(key),
                   "records": {f"h{i:05d}": {"type": "A", "values": [_ip(i)], "ttl": 300}
                               for i in range(n)}}}}}))
        walls, inner = [], []
        for run in range(args.runs):
            t0 = time.perf_counter()
            r = subprocess.run([PROVISION, "dns", "check", "--zone", ZONE, "-i", str(inv), "--json"],
                               capture_output=True, text=True, timeout=600)
            walls.append(time.perf_counter() - t0)
            data = json.loads(r.stdout) if r.stdout.startswith("{") else {}
            z = data.get("zones", [{}])[0]
            inner.append((z.get("seconds"), z.get("queries"), z.get("queries_per_second")))
            print(f"run {run + 1}: exit {r.returncode}, {walls[-1]:.2f} s wall, queries "
                  f"{z.get('queries')} in {z.get('seconds')} s ({z.get('queries_per_second')}/s)"
                  + ("" if r.returncode == 0 else f"\n{r.stderr[-2000:]}"))
        print(f"dns check --zone, {n} records x (2 authoritative + 1 resolver) + markers: "
              f"median {statistics.median(walls):.2f} s as a whole process; query phase "
              f"median {statistics.median([s for s, _, _ in inner if s is not None] or [0.0]):.2f} s")
        targets = [prop.Target(f"ns{i + 1}.{ZONE}.", a, "authoritative") for i, a in enumerate(NS)]
        targets.append(prop.Target(RESOLVER, RESOLVER, "resolver"))
        qs = questions([rrset(f"h{i:05d}.{ZONE}.", "A", 300, [_ip(i)]) for i in range(n)], targets)
        for bound in () if args.no_compare else (16, 32, 64):
            for kind in ("threads", "asyncio"):
                t0 = time.perf_counter()
                got = list(ask_all(qs, in_flight=bound).values()) if kind == "threads" \
                    else ask_async(qs, bound)
                s = time.perf_counter() - t0
                bad = sum(1 for a in got if a.status in ("TIMEOUT", "ERROR"))
                print(f"{kind:>7}, {bound:>2} in flight: {len(qs)} queries in {s:.2f} s "
                      f"({len(qs) / s:,.0f}/s), {bad} unanswered", flush=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
