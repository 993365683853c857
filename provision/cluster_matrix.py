"""`provision audit --cluster NAME` (pure): what to run for each pair of members, what iperf3
said, and the matrix.

Each ordered pair (source -> target) is measured alone, one after the other (two at once
would share the links they measure): iperf3 serves one test on the target, on the
rendezvous port and then on a port of the ephemeral range (where NCCL and Gloo listen), and
the source connects to each, the second time for `seconds` of TCP throughput with the
round-trip time the kernel measured (`mean_rtt`). The bastions the members are reached
through are tried the same way, on the same two ports: for them, "closed" is the pass.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from shlex import quote
from typing import Literal

from provision.frozen import frozen
from provision.inventory.model import Cluster, Inventory

Reach = Literal["open", "closed", "busy", "error"]
READY = re.compile(r"Server listening on (\d+)")
DEFAULT_EPHEMERAL = (32768, 60999)  # Linux's own range, when the cluster narrows none
CONNECT_MS = 3000  # iperf3's --connect-timeout: a dropped SYN is "closed" after this


@frozen
class Probe:
    """One connection tried from `source` to `target`'s `address`:`port`."""

    source: str
    target: str
    address: str
    port: int
    kind: Literal["rendezvous", "ephemeral"]
    member: bool  # the source is a member (else a bastion in front of them)


@frozen
class Result:
    probe: Probe
    reach: Reach
    gbps: float | None = None  # received, for the ephemeral probe of a member
    rtt_ms: float | None = None
    why: str = ""

    @property
    def ok(self) -> bool:
        """Open between members, closed from anyone else."""
        return self.reach == ("open" if self.probe.member else "closed")

    def to_json(self) -> dict[str, object]:
        p = self.probe
        return {"from": p.source, "to": p.target, "address": p.address, "port": p.port,
                "kind": p.kind, "member": p.member, "reach": self.reach, "ok": self.ok,
                "gbps": self.gbps, "rtt_ms": self.rtt_ms, "why": self.why or None}


def ephemeral_port(cluster: Cluster) -> int:
    """A port in the middle of the range NCCL and Gloo bind in."""
    lo, hi = cluster.ephemeral_ports or DEFAULT_EPHEMERAL
    return lo + (hi - lo) // 2


def probes(inv: Inventory, cluster: Cluster) -> list[Probe]:
    """Every ordered pair of members, then every bastion in front of a member, to it."""
    out: list[Probe] = []
    eph = ephemeral_port(cluster)
    pairs = [(a, b, True) for a in cluster.members for b in cluster.members if a != b]
    outsiders = dict.fromkeys(inv.node(m).jump_chain[-1] for m in cluster.members
                              if inv.node(m).jump_chain)
    pairs += [(o, b, False) for o in outsiders for b in cluster.members]
    for src, dst, member in pairs:
        for port, kind in ((cluster.rendezvous, "rendezvous"), (eph, "ephemeral")):
            out.append(Probe(src, dst, cluster.address_of(dst), port, kind, member))  # type: ignore[arg-type]
    return out


def server_command(port: int) -> str:
    """iperf3 serving one test on `port` (it prints READY once it listens)."""
    return f"exec iperf3 -s -1 -p {int(port)} --forceflush"


def client_command(p: Probe, seconds: float) -> str:
    timed = f"-t {seconds:g}" if p.kind == "ephemeral" and p.member else "-n 64K"
    return (f"exec iperf3 -c {quote(p.address)} -p {int(p.port)} {timed} -J "
            f"--connect-timeout {CONNECT_MS}")


def busy(server_output: str) -> bool:
    """The server could not listen: something else holds the port (a job)."""
    return "Address already in use" in server_output


def result(p: Probe, status: int | None, stdout: str) -> Result:
    """The client's JSON (`iperf3 -J`) as a Result."""
    try:
        doc = json.loads(stdout)
    except json.JSONDecodeError:
        return Result(p, "error", why=f"iperf3 exited {status} without its JSON report: "
                      f"{stdout.strip()[:200]!r}")
    if not isinstance(doc, dict):
        return Result(p, "error", why="iperf3's report is not an object")
    err = doc.get("error")
    if isinstance(err, str):
        closed = any(w in err for w in ("unable to connect", "Connection refused",
                                        "Connection timed out", "No route to host"))
        return Result(p, "closed" if closed else "error", why=err[:200])
    end = doc.get("end") if isinstance(doc.get("end"), dict) else {}
    assert isinstance(end, dict)
    gbps = rtt = None
    received = end.get("sum_received")
    if isinstance(received, dict) and isinstance(received.get("bits_per_second"), int | float):
        gbps = round(float(received["bits_per_second"]) / 1e9, 3)
    streams = end.get("streams")
    if isinstance(streams, list) and streams and isinstance(streams[0], dict):
        sender = streams[0].get("sender")
        if isinstance(sender, dict) and isinstance(sender.get("mean_rtt"), int | float):
            rtt = round(float(sender["mean_rtt"]) / 1000, 3)  # microseconds
    if p.kind == "rendezvous" or not p.member:
        gbps = rtt = None
    return Result(p, "open", gbps, rtt)


def matrix(cluster: Cluster, results: Sequence[Result]) -> list[list[str]]:
    """Rows: the table as text, a header row first (sources down, targets across)."""
    members = list(cluster.members)
    sources = list(dict.fromkeys([*members, *(r.probe.source for r in results)]))
    cells: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        cells.setdefault((r.probe.source, r.probe.target), []).append(r)
    rows = [["from \\ to", *members]]
    for s in sources:
        row = [s]
        for t in members:
            got = cells.get((s, t), [])
            row.append("-" if s == t else _cell(got))
        rows.append(row)
    return rows


def _cell(got: list[Result]) -> str:
    if not got:
        return "?"
    reach = "/".join(r.reach for r in got)
    mark = "ok" if all(r.ok for r in got) else "FAIL"
    eph = next((r for r in got if r.probe.kind == "ephemeral"), None)
    if eph is not None and eph.gbps is not None:
        return f"{eph.gbps:.2f} Gb/s {eph.rtt_ms or 0:.2f} ms {mark}"
    return f"{reach} {mark}"


def failures(results: Sequence[Result]) -> list[str]:
    out = []
    for r in results:
        if r.ok:
            continue
        p = r.probe
        want = "open" if p.member else "closed"
        out.append(f"{p.source} -> {p.target} {p.address} port {p.port} ({p.kind}): {r.reach}, "
                   f"should be {want}" + (f" ({r.why})" if r.why else ""))
    return out
