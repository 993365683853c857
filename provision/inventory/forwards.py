"""Local port forwards to a host's tunnel services (pure).

One definition serves the rendered ssh_config (LocalForward lines), `check` (local
port collisions) and `provision tunnel` (which may move a forward to a free port).
"""

from __future__ import annotations

import ipaddress
from dataclasses import replace

from provision.frozen import frozen
from provision.inventory.model import Host, Service

LOCAL_BIND = "127.0.0.1"  # local listeners never bind anything else (docs/architecture.md#principles, 7)


@frozen
class Forward:
    service: str
    local_port: int
    remote_host: str  # address on the target host the forward connects to
    remote_port: int
    scheme: str = "http"
    remote_socket: str | None = None  # a Unix socket on the host instead of host:port

    @property
    def local(self) -> str:
        return f"{LOCAL_BIND}:{self.local_port}"

    @property
    def remote(self) -> str:
        """What the forward reaches on the host, as OpenSSH's -L and LocalForward take it."""
        if self.remote_socket is not None:
            return self.remote_socket
        host = f"[{self.remote_host}]" if ":" in self.remote_host else self.remote_host
        return f"{host}:{self.remote_port}"

    def on_port(self, local_port: int) -> Forward:
        return replace(self, local_port=local_port)


def remote_target(service: Service) -> str:
    """Where on the host the forward connects: the bind address, loopback for a wildcard."""
    ip = ipaddress.ip_address(service.bind)
    if ip.is_unspecified:
        return "::1" if ip.version == 6 else "127.0.0.1"
    return service.bind


def forward_for(service: Service) -> Forward:
    """The forward for one service, on the same local port as the remote one (a member's
    own server: the service's declared port, 8888 for Jupyter, whatever its host port or
    socket)."""
    return Forward(service.name, service.local_port or service.port, remote_target(service),
                   service.port, service.scheme, service.socket)


def local_forwards(host: Host, user: str | None = None) -> tuple[Forward, ...]:
    """The ssh_config's LocalForwards for `host` as `user` logs in: one per tunnel service
    they reach (their own per-user server, nobody else's), ordered by port."""
    return tuple(forward_for(s) for s in sorted(host.tunnel_services_for(user),
                                                key=lambda s: (s.port, s.name)))


def peer_uid(proc_net_tcp: str, peer: tuple[str, int], local_port: int) -> int | None:
    """The uid of the local account whose socket `peer` (127.0.0.1:PORT) connects to our
    listener on `local_port`, from /proc/net/tcp's text; None when it is not there."""
    if peer[0] != LOCAL_BIND:
        return None
    src, dst = f"0100007F:{peer[1]:04X}", f"0100007F:{local_port:04X}"
    for line in proc_net_tcp.splitlines()[1:]:
        f = line.split()
        if len(f) > 7 and f[1] == src and f[2] == dst and f[7].isdigit():
            return int(f[7])
    return None
