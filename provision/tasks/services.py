"""Systemd services from the inventory (pure diff): unit files and configs rendered by
`provision.render`, data directories, daemon-reload only when a unit changed, enable +
start, restart only the services whose unit or config changed (or whose files are newer
than the running process, which is what an interrupted run leaves behind)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provision.facts import Facts, Request
from provision.inventory.model import Host, Inventory
from provision.render import host_directories, render_host

from .actions import (
    Action,
    DaemonReload,
    EnableUnit,
    Mkdir,
    RestartUnit,
    StartUnit,
    WriteFile,
)
from .files import diff_file

KINDS = ("unit", "jupyter-config")


def _artifacts(inv: Inventory, host: Host) -> tuple[Any, ...]:
    units = {s.unit_name for s in host.services}
    return tuple(a for a in render_host(inv, host) if a.kind in KINDS and a.service in units)


def _directories(host: Host) -> tuple[tuple[str, str], ...]:
    return host_directories(host)


@dataclass(frozen=True)
class ServicesStep:
    inv: Inventory
    host: Host
    name: str = "services"
    artifacts: tuple[Any, ...] = field(default=(), compare=False)
    directories: tuple[tuple[str, str], ...] = ()

    @classmethod
    def build(cls, inv: Inventory, host: Host) -> ServicesStep:
        return cls(inv, host, artifacts=_artifacts(inv, host), directories=_directories(host))

    def request(self) -> Request:
        return Request(files=tuple(a.path for a in self.artifacts),
                       dirs=tuple(p for p, _ in self.directories),
                       users=tuple(dict.fromkeys(u for _, u in self.directories)),
                       units=tuple(s.unit_name for s in self.host.services))

    def diff(self, facts: Facts) -> list[Action]:
        writes: list[Action] = []
        changed: set[str] = set()
        unit_written = False
        newest: dict[str, int] = {}
        for a in self.artifacts:
            fact = facts.file(a.path)
            newest[a.service] = max(newest.get(a.service, 0), fact.mtime)
            acts = diff_file(fact, WriteFile(a.path, a.content, a.mode, a.owner, a.group))
            if any(isinstance(x, WriteFile) for x in acts):
                changed.add(a.service)
                unit_written |= a.kind == "unit"
            writes += acts
        dirs: list[Action] = []
        for path, owner in self.directories:
            if facts.dir(path).kind == "absent":
                u = facts.users.get(owner)
                dirs.append(Mkdir(path, 0o755, owner, u.group if u else owner))
        enables: list[Action] = []
        units: list[Action] = []
        stale_reload = False
        for s in self.host.services:
            unit = facts.units.get(s.unit_name)
            if unit is not None and unit.need_daemon_reload:
                stale_reload = True
            if unit is None or not unit.enabled:
                enables.append(EnableUnit(s.unit_name))
            if unit is None or not unit.active:
                units.append(StartUnit(s.unit_name))
            elif s.unit_name in changed:
                units.append(RestartUnit(s.unit_name, "unit or config changed"))
            elif unit.need_daemon_reload:
                units.append(RestartUnit(s.unit_name, "unit file changed on disk"))
            elif unit.active_since is not None and newest.get(s.unit_name, 0) > unit.active_since:
                units.append(RestartUnit(s.unit_name, "files newer than the running process"))
        # One daemon-reload per batch, after the enables (`enable --no-reload`): each plain
        # `systemctl enable` reloads the manager itself, and a reload (generators, every unit
        # file) was the costliest part of a cold bootstrap on a host with two services.
        reload: list[Action] = [DaemonReload()] if unit_written or stale_reload or enables else []
        return [*writes, *dirs, *enables, *reload, *units]
