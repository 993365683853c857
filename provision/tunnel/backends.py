"""The tunnel backends, by name: one registration line each (I/O only to load them).

A backend is a module that defines `BACKEND = BackendSpec(...)`: its name, a line of help,
its availability check (None when usable, else why not, in words) and how to build it from a
`Request`. `REGISTRY` maps each name to that attribute, in the order `auto` tries them; the
CLI offers these names and never names one itself. Modules are imported only when asked
for (the paramiko backend loads paramiko and Fabric).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

from provision.errors import UsageError
from provision.frozen import frozen
from provision.inventory.forwards import Forward
from provision.inventory.model import Host, Inventory
from provision.ssh.login import Hop, Login
from provision.tunnel.session import Backend, Log

# name -> "module:attribute" of its BackendSpec; `auto` takes the first one available
REGISTRY: dict[str, str] = {
    "openssh": "provision.tunnel.openssh:BACKEND",
    "paramiko": "provision.tunnel.paramiko_backend:BACKEND",
}
AUTO = "auto"


@frozen
class Request:
    """What every backend is built from."""

    inv: Inventory
    host: Host
    login: Login
    hops: tuple[Hop, ...]
    forwards: tuple[Forward, ...]
    keepalive: int
    log: Log


@frozen
class BackendSpec:
    name: str
    summary: str
    unavailable: Callable[[], str | None]  # None: usable here; else why not
    make: Callable[[Request], Backend]


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def spec(name: str) -> BackendSpec:
    module, attr = REGISTRY[name].split(":")
    found = getattr(importlib.import_module(module), attr)
    assert isinstance(found, BackendSpec) and found.name == name, REGISTRY[name]
    return found


def choose(requested: str | None, registry: Sequence[str] | None = None) -> BackendSpec:
    """The backend for `--backend` (None or auto: the first available, in REGISTRY order).
    UsageError (exit 2) for an unknown name or one not usable here."""
    order = tuple(registry if registry is not None else REGISTRY)
    choice = requested or AUTO
    if choice == AUTO:
        reasons = []
        for name in order:
            s = spec(name)
            why = s.unavailable()
            if why is None:
                return s
            reasons.append(f"{name}: {why}")
        raise UsageError(f"no tunnel backend is usable here ({'; '.join(reasons)})")
    if choice not in order:
        raise UsageError(f"unknown tunnel backend {choice!r} (allowed: {', '.join((AUTO, *order))})")
    s = spec(choice)
    why = s.unavailable()
    if why is not None:
        others = [n for n in order if n != choice]
        raise UsageError(f"--backend {choice}: {why}"
                         + (f" (try --backend {' or '.join(others)})" if others else ""))
    return s
