"""Plot bench/converge.sh's results: wall time against fleet size, one line per tool and
scenario (no-op solid, cold dashed). Runs in the bench's own environment (matplotlib is
installed into bench/.peers/venv, not the project's venv).
Usage: plot_converge.py RESULTS.json OUT.png "1 8 32"
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(results: str, out: str, sizes_text: str) -> None:
    r = json.load(open(results))
    sizes = [int(s) for s in sizes_text.split()]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    colours = {"provision": "tab:green", "pyinfra": "tab:blue", "ansible": "tab:red"}
    for tool, colour in colours.items():
        for scenario, style in (("noop", "-"), ("cold", "--")):
            ys = [r.get(f"{tool}.{scenario}.{n}") for n in sizes]
            if None in ys:
                continue
            ax.plot(sizes, ys, style, marker="o", color=colour,
                    label=f"{tool} {'no-op' if scenario == 'noop' else 'cold'}")
    ax.set_xlabel("GPU hosts converged at once (through one bastion)")
    ax.set_ylabel("wall time, s (median)")
    ax.set_xticks(sizes)
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("Converge wall time vs fleet size (2-core machine, lab hosts)")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
