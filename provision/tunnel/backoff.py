"""When a tunnel reconnects, and when a silent link is dead (pure)."""

from __future__ import annotations

KEEPALIVE_COUNT = 3  # OpenSSH ServerAliveCountMax and our own miss budget


def backoff(attempt: int, base: float = 1.0, cap: float = 30.0) -> float:
    """Seconds before reconnect attempt `attempt` (0-based): 1, 2, 4, … capped."""
    return float(min(cap, base * (2 ** max(0, attempt))))


def dead_after(keepalive: int, count: int = KEEPALIVE_COUNT) -> int:
    """Seconds of silence after which a link is declared dead."""
    return keepalive * count
