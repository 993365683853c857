"""Which local ports the rendered ssh_config forwards, per host (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from .inventory.model import Host


@dataclass(frozen=True)
class Forward:
    service: str
    local_port: int
    remote_host: str  # as seen from the target host
    remote_port: int


def local_forwards(host: Host) -> tuple[Forward, ...]:
    """One LocalForward per tunnel service; the local port is the remote port."""
    out = []
    for s in host.tunnel_services:
        target = s.bind
        if s.is_wildcard:  # a wildcard listener answers on loopback too
            target = "::1" if ":" in s.bind else "127.0.0.1"
        out.append(Forward(s.name, s.port, target, s.port))
    return tuple(out)
