"""The heat map of `provision audit --cluster NAME --plot FILE`: each pair's TCP bandwidth
(Gb/s), sources down, targets across, so a slow pair (a level of the fabric further away)
shows at a glance; a pair that did not connect is marked. matplotlib is imported here only
(`pip install provision[plot]`): audit itself never loads it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from provision.cluster_matrix import Result
from provision.errors import UsageError
from provision.inventory.model import Cluster


def grid(cluster: Cluster, results: Sequence[Result]) -> list[list[float | None]]:
    """Gb/s per (source, target) member pair; None on the diagonal and where no bandwidth
    was measured (not open)."""
    gbps = {(r.probe.source, r.probe.target): r.gbps for r in results
            if r.probe.member and r.probe.kind == "ephemeral" and r.reach == "open"}
    return [[None if s == t else gbps.get((s, t)) for t in cluster.members]
            for s in cluster.members]


def plot(cluster: Cluster, results: Sequence[Result], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display: a file only
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'provision[plot]'") from None
    values = grid(cluster, results)
    names = list(cluster.members)
    numbers = [v for row in values for v in row if v is not None]
    top = max(numbers) if numbers else 1.0
    data = [[float("nan") if v is None else v for v in row] for row in values]
    size = 1.2 + 0.9 * len(names)
    fig, ax = plt.subplots(figsize=(size + 1.5, size))
    image = ax.imshow(data, cmap="viridis", vmin=0, vmax=top)
    ax.set_xticks(range(len(names)), labels=names, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), labels=names)
    ax.set_xlabel("to")
    ax.set_ylabel("from")
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            text = "" if i == j else "no\nconnection" if v is None else f"{v:.2f}"
            ax.text(j, i, text, ha="center", va="center", fontsize=8,
                    color="white" if v is None or v < top * 0.6 else "black")
    ax.set_title(f"cluster {cluster.name}: TCP Gb/s (iperf3)")
    fig.colorbar(image, ax=ax, label="Gb/s")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
