"""Plot bench/fleet.sh's figures: wall time, and the tool's own CPU-seconds per host, against
fleet size; one line per tool and run (plan solid, exec dashed). Runs in the bench's own
environment (matplotlib lives in bench/.peers/venv). Usage: plot_fleet.py FLEET.json OUT.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main(results: str, out: str) -> None:
    rows = json.loads(Path(results).read_text())
    fig, (wall, cpu) = plt.subplots(1, 2, figsize=(10, 4.2), dpi=110)
    colours = {"provision": "tab:green", "pyinfra": "tab:blue"}
    for tool, colour in colours.items():
        for scenario, style in (("plan", "-"), ("exec", "--")):
            pts = sorted((r["hosts"], r) for r in rows
                         if r["tool"] == tool and r["scenario"] == scenario)
            if not pts:
                continue
            xs = [n for n, _ in pts]
            label = f"{tool} {'no-op plan' if scenario == 'plan' else 'exec -- true'}"
            wall.plot(xs, [r["wall_s"] for _, r in pts], style, marker="o", color=colour, label=label)
            cpu.plot(xs, [r["own_cpu_per_host_s"] for _, r in pts], style, marker="o",
                     color=colour, label=label)
            for n, r in pts:  # a run that lost hosts is marked, not dropped
                if r["failed"]:
                    wall.plot([n], [r["wall_s"]], "x", color="black", markersize=9)
                    cpu.plot([n], [r["own_cpu_per_host_s"]], "x", color="black", markersize=9)
    sizes = sorted({r["hosts"] for r in rows})
    for ax, title, ylabel in ((wall, "wall time", "seconds (median)"),
                              (cpu, "the tool's own CPU per host", "CPU-seconds per host")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(n) for n in sizes])
        ax.set_xlabel("GPU hosts at once (through one bastion)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    wall.legend(fontsize=8)
    fig.suptitle("No-op plan and exec vs fleet size (2-core machine, lab hosts; x: hosts lost)")
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
