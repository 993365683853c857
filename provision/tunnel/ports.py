"""What a tunnel forwards, and on which local ports (pure): the services a login reaches
(or those named), each on a free local port near the one it wants."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from provision.errors import UsageError
from provision.inventory.forwards import Forward, forward_for
from provision.inventory.model import Host, Service

PORT_SEARCH = 100  # how far from the wanted port we look for a free one


class TunnelError(UsageError):
    """A problem the user must fix (bad names, no free port); exit status 2."""



def select_services(host: Host, names: Sequence[str], user: str | None = None) -> tuple[Service, ...]:
    """The host's tunnel services `user` reaches (shared ones and their own per-user server,
    nobody else's), or only those named: `jupyter` names `user`'s own server when the
    service is per-user. Raises TunnelError on bad names."""
    tunnel = host.tunnel_services_for(user)
    if not names:
        if not tunnel:
            raise TunnelError(f"{host.name} has no service with expose: tunnel for "
                              f"{user or host.user} (services: "
                              f"{', '.join(s.name for s in host.services) or 'none'})")
        return tunnel
    out: list[Service] = []
    for name in names:
        svc = host.service(name) or host.service(f"{name}@{user}")
        if svc is not None and not svc.visible_to(user):
            raise TunnelError(f"{host.name}: {name} is {svc.member}'s own server; only "
                              f"{svc.member}'s login reads its token (--user {svc.member})")
        if svc is None and any(s.template == name for s in host.services):
            raise TunnelError(f"{host.name}: {name} is per-user and {user or host.user} has "
                              f"none (members: {', '.join(s.member or '' for s in host.services if s.template == name)})")
        if svc is None:
            known = ", ".join(s.name for s in tunnel) or "none"
            raise TunnelError(f"{host.name} has no service '{name}' (tunnel services: {known})")
        if svc.expose.kind != "tunnel":
            raise TunnelError(f"{host.name}: service '{name}' has expose: {svc.expose.kind}, "
                              f"not tunnel")
        if svc not in out:
            out.append(svc)
    return tuple(out)


def pick_local_port(wanted: int, is_free: Callable[[int], bool], taken: Iterable[int] = (),
                    search: int = PORT_SEARCH) -> int:
    """The wanted port when free, else the nearest free one above it, then below it."""
    used = set(taken)
    candidates = [wanted] + [wanted + d for d in range(1, search + 1)] \
        + [wanted - d for d in range(1, search + 1)]
    for port in candidates:
        if 1024 <= port <= 65535 and port not in used and is_free(port):
            return port
        if port == wanted and port < 1024 and port not in used and is_free(port):
            return port
    raise TunnelError(f"no free local port within {search} of {wanted}")


def local_port_wanted(service: Service, requested: dict[str, int] | None = None) -> int:
    """`--port NAME=PORT` (a member's server answers to its service's name too), else the
    forward's own local port."""
    asked = requested or {}
    return asked.get(service.name, asked.get(service.template or "",
                                             service.local_port or service.port))


def plan_forwards(services: Sequence[Service], is_free: Callable[[int], bool],
                  requested: dict[str, int] | None = None) -> tuple[Forward, ...]:
    """One forward per service, each on its own local port."""
    out: list[Forward] = []
    for s in services:
        want = local_port_wanted(s, requested)
        port = pick_local_port(want, is_free, taken=[f.local_port for f in out])
        out.append(forward_for(s).on_port(port))
    return tuple(out)
