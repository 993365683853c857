"""bench/fleet.sh's summary: wall time and CPU-seconds per host for each tool, scenario and
fleet size, with pyinfra's ratio to provision; writes the figures as JSON for the plot.
Usage: fleet_report.py RESULTS.txt CPU.txt FAILURES.txt OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def main(results: str, cpu: str, failures: str, out: str) -> None:
    walls: dict[tuple[str, str, int], float] = {}
    for line in Path(results).read_text().splitlines():
        name, run, hosts, seconds = line.split()
        walls[(name, run, int(hosts))] = float(seconds)
    cpus: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for line in Path(cpu).read_text().splitlines():
        tag, own_s, machine_s = line.split()
        cpus[tag].append((float(own_s), float(machine_s)))
    failed = {line.split(":")[0] for line in Path(failures).read_text().splitlines() if line.strip()}
    rows: list[dict[str, Any]] = []
    for (tool, scenario, n), wall in sorted(walls.items()):
        tag = f"{tool}-{scenario}-{n}"
        own = statistics.median(c[0] for c in cpus[tag])
        machine = statistics.median(c[1] for c in cpus[tag])
        rows.append({"tool": tool, "scenario": scenario, "hosts": n, "wall_s": wall,
                     "own_cpu_s": own, "machine_cpu_s": machine,
                     "own_cpu_per_host_s": round(own / n, 4),
                     "machine_cpu_per_host_s": round(machine / n, 4),
                     "failed": tag in failed})
    Path(out).write_text(json.dumps(rows, indent=1))
    print(f"{'tool':<10}{'run':<6}{'hosts':>6}{'wall s':>9}{'own CPU s/host':>16}"
          f"{'machine CPU s/host':>20}")
    for r in rows:
        mark = "  FAILED (hosts lost, see its log)" if r["failed"] else ""
        print(f"{r['tool']:<10}{r['scenario']:<6}{r['hosts']:>6}{r['wall_s']:>9.2f}"
              f"{r['own_cpu_per_host_s']:>16.3f}{r['machine_cpu_per_host_s']:>20.3f}{mark}")
    by = {(r["tool"], r["scenario"], r["hosts"]): r for r in rows}
    print()
    for (tool, scenario, n), r in sorted(by.items()):
        p = by.get(("provision", scenario, n))
        if tool == "provision" or p is None:
            continue
        lost = f" (not comparable: {tool} lost hosts)" if r["failed"] else ""
        print(f"{scenario} {n:>3} hosts: {tool}/provision wall {r['wall_s'] / p['wall_s']:.1f}x, "
              f"own CPU {r['own_cpu_s'] / max(p['own_cpu_s'], 0.01):.1f}x{lost}")
    for scenario in ("plan", "exec"):
        sizes = sorted(n for t, s, n in by if t == "provision" and s == scenario)
        if len(sizes) > 1:
            lo, hi = by[("provision", scenario, sizes[0])], by[("provision", scenario, sizes[-1])]
            print(f"provision {scenario}: {sizes[-1]} hosts / {sizes[0]} = "
                  f"{hi['wall_s'] / lo['wall_s']:.2f}x the wall time, own CPU per host "
                  f"{lo['own_cpu_per_host_s']:.3f} -> {hi['own_cpu_per_host_s']:.3f} s")


if __name__ == "__main__":
    main(*sys.argv[1:5])
