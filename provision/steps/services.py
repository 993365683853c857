"""Systemd services from the inventory (pure diff): unit files and configs rendered by
`provision.render`, data directories, daemon-reload only when a unit changed, enable +
start, restart only the services whose unit or config changed (or whose files are newer
than the running process, which is what an interrupted run leaves behind).

Per-user servers (`per_user:`) are instances of a template unit: one per member, each
restarted when its own files or the template change; an instance whose member left is
stopped and disabled (found by the units fact, asked for `provision-NAME@*.service`),
and their files stay. A team data directory (`group:`) gets its group, with every team
member in it and people who left taken out."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from provision.facts import Facts, Request
from provision.facts.users import SERVICE_COMMENT
from provision.frozen import frozen
from provision.inventory.catalog import service_home
from provision.inventory.model import Host, Inventory
from provision.render import host_directories, render_host, team_directories

from .actions import (
    NOLOGIN,
    Action,
    DaemonReload,
    EnableUnit,
    EnsureGroup,
    EnsureUser,
    LoadNewUnits,
    Mkdir,
    RestartUnit,
    RetireUnit,
    StartUnit,
    WriteFile,
)
from .credentials import directories as secret_dirs
from .credentials import secret_actions
from .files import diff_file
from .member_servers import check_members, gpu_warnings, retired_instances
from .refused import Refused

KINDS = ("unit", "jupyter-config")
SYSTEM_GID_END = 1000  # Debian: gids below are the system's (sudo, adm, docker, disk, shadow, ...)
NOGROUP_GID = 65534


def _artifacts(inv: Inventory, host: Host) -> tuple[Any, ...]:
    units = {s.unit_name for s in host.services} | {s.template_unit for s in host.services}
    return tuple(a for a in render_host(inv, host) if a.kind in KINDS and a.service in units)


def _directories(host: Host) -> tuple[tuple[str, str], ...]:
    return host_directories(host)


def _new_to_systemd(unit: str, facts: Facts) -> bool:
    """systemd holds no definition of this unit (not even a stale one): it reads the file
    when first asked. A template's instances are left to the daemon-reload."""
    fact = facts.units.get(unit)
    return "@" not in unit and fact is not None and fact.load_state == "not-found"


@frozen
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
        team_dirs = team_directories(self.host)
        members = tuple(s.member for s in self.host.services if s.member)
        groups = tuple(dict.fromkeys(g for _, _, g in team_dirs))
        team = tuple(p.name for p in self.inv.team) if groups else ()
        patterns = tuple(dict.fromkeys(f"{t.removesuffix('@.service')}@*.service"
                                       for s in self.host.services
                                       if (t := s.template_unit)))
        own = tuple(s.user for s in self.host.services if s.own_account)
        return Request(files=tuple(a.path for a in self.artifacts),
                       dirs=(*(p for p, _ in self.directories), *(p for p, _, _ in team_dirs)),
                       users=tuple(dict.fromkeys((*own, *(u for _, u in self.directories),
                                                  *(o for _, o, _ in team_dirs),
                                                  *members, *team))),
                       units=(*(s.unit_name for s in self.host.services), *patterns),
                       groups=groups,
                       credentials=secret_dirs(self.host, bool(self.inv.secrets)))

    def diff(self, facts: Facts) -> list[Action]:
        check_members(self.host, facts)  # Refused: nothing is applied
        accounts = self._accounts(facts)
        writes: list[Action] = []
        changed: set[str] = set()
        units_written: list[str] = []
        newest: dict[str, int] = {}
        for a in self.artifacts:
            fact = facts.file(a.path)
            newest[a.service] = max(newest.get(a.service, 0), fact.mtime)
            acts = diff_file(fact, WriteFile(a.path, a.content, a.mode, a.owner, a.group))
            if any(isinstance(x, WriteFile) for x in acts):
                changed.add(a.service)
                if a.kind == "unit":
                    units_written.append(a.service)
            writes += acts
        secrets, secret_changed = secret_actions(self.host, self.inv.vault, facts)
        writes += secrets
        dirs: list[Action] = []
        for path, owner in self.directories:
            if facts.dir(path).kind == "absent":
                u = facts.users.get(owner)
                dirs.append(Mkdir(path, 0o755, owner, u.group if u else owner))
        groups = self._groups(facts)
        for path, owner, group in team_directories(self.host):
            d = facts.dir(path)
            if (d.kind, d.mode, d.owner, d.group) != ("dir", 0o2770, owner, group):
                dirs.append(Mkdir(path, 0o2770, owner, group))
        enables: list[Action] = []
        units: list[Action] = []
        stale_reload = False
        for s in self.host.services:
            unit = facts.units.get(s.unit_name)
            if unit is not None and unit.need_daemon_reload:
                stale_reload = True
            if unit is None or not unit.enabled:
                enables.append(EnableUnit(s.unit_name))
            # the one TCP port the service binds (a member's own port for a per-user
            # server): the batch takes the unit listening there as settled
            ports = (s.port,)
            if unit is None or not unit.active:
                units.append(StartUnit(s.unit_name, ports))
            elif s.unit_name in changed:
                units.append(RestartUnit(s.unit_name, "unit or config changed", ports))
            elif unit.need_daemon_reload:
                units.append(RestartUnit(s.unit_name, "unit file changed on disk", ports))
            elif s.unit_name in secret_changed:
                names = ", ".join(dict.fromkeys(secret_changed[s.unit_name]))
                units.append(RestartUnit(s.unit_name, f"secret {names} changed", ports))
            elif s.template_unit in changed:
                units.append(RestartUnit(s.unit_name, "template unit changed", ports))
            elif unit.active_since is not None and max(
                    newest.get(s.unit_name, 0), newest.get(s.template_unit or "", 0)) > unit.active_since:
                units.append(RestartUnit(s.unit_name, "files newer than the running process", ports))
        retire: list[Action] = [RetireUnit(u, "its member is no longer listed")
                                for u in retired_instances(self.host, facts)]
        # One daemon-reload per batch, after the enables (`enable --no-reload`): each plain
        # `systemctl enable` reloads the manager itself, and a reload (generators, every unit
        # file) was the costliest part of a cold bootstrap on a host with two services. When
        # systemd has loaded none of the units written or enabled (a fresh host), it loads
        # them on first use and no reload is needed at all.
        touched = list(dict.fromkeys([*units_written, *(e.unit for e in enables
                                                        if isinstance(e, EnableUnit))]))
        reload: list[Action] = []
        if stale_reload or not all(_new_to_systemd(u, facts) for u in touched):
            reload = [DaemonReload()]
        elif touched:
            reload = [LoadNewUnits(tuple(touched))]
        return [*accounts, *writes, *groups, *dirs, *enables, *reload, *retire, *units]

    def _accounts(self, facts: Facts) -> list[Action]:
        """Each service's own account (svc-NAME): created as a system account that logs in
        nowhere, with a home of its own (0700). One that exists and is not ours (another
        service's of the host, a person's) is refused: the service would run as them."""
        out: list[Action] = []
        for s in self.host.services:
            if not s.own_account or any(isinstance(a, EnsureUser) and a.name == s.user for a in out):
                continue
            u = facts.users.get(s.user)
            if u is None:
                out.append(EnsureUser(s.user, service_home(s.user), NOLOGIN, create=True,
                                      service=s.name))
            elif u.comment != SERVICE_COMMENT:
                raise Refused(f"services: refusing to run {s.name} as {s.user}: the account "
                              f"exists on this host (uid {u.uid}) and is not one provision made "
                              f"for a service; give the service a 'user', or remove the account")
        return out

    def notes(self, facts: Facts) -> list[str]:
        """What the plan could not check (the recap's note)."""
        return gpu_warnings(self.host, facts)

    def _groups(self, facts: Facts) -> list[Action]:
        """Each team directory's group: there, holding the team and nobody who left. An
        existing group that is a system group or an account's own group is refused: every
        member would be added to it (sudo, docker, disk, or alice's private group)."""
        team = [p.name for p in self.inv.team]
        out: list[Action] = []
        for group in dict.fromkeys(g for _, _, g in team_directories(self.host)):
            gid, own = facts.group_ids.get(group, (None, None))
            if gid is not None and (gid < SYSTEM_GID_END or gid == NOGROUP_GID):
                raise Refused(f"services: refusing group '{group}' for a team directory: it is a "
                              f"system group on this host (gid {gid}), and every team member "
                              "would be added to it; name a group of the team's own")
            if own is not None:
                raise Refused(f"services: refusing group '{group}' for a team directory: it is "
                              f"{own}'s own group on this host (their primary group), and every "
                              "team member would be added to it; name a group of the team's own")
            have = facts.groups.get(group)
            add = tuple(m for m in team if have is None or m not in have)
            gone = tuple(m for m in (have or ()) if m in facts.managed_users and m not in team)
            if have is None or add or gone:
                out.append(EnsureGroup(group, have is None, add, gone))
        return out
