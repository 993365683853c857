"""Inclusive integer intervals (pure): ports of a cluster, address ranges of a firewall."""

from __future__ import annotations

from collections.abc import Sequence

Span = tuple[int, int]


def merge(spans: Sequence[Span]) -> tuple[Span, ...]:
    """Sorted, disjoint spans covering the same integers (touching ones joined)."""
    out: list[Span] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)
