"""Services: one service merged from its roles and host and checked (catalog defaults,
accounts, directories, the door, secrets), and a `per_user` service's server per member."""

from __future__ import annotations

import difflib
from dataclasses import replace

from provision.secretdata.check import service_problems

from .. import culling
from .. import https as door
from .. import model as m
from ..catalog import (
    ACCOUNT_MAX,
    CATALOG,
    DEFAULT_BIND,
    DEFAULT_LOGDIR,
    member_socket,
    service_account,
)
from ..member_ports import DEFAULT_RANGE, allocate
from ..programs import program
from ..schema import ExposeFrom, MemberServiceDoc, ServiceDoc
from ..source import FieldPath
from .accounts import PRIVILEGED_GROUPS, RESERVED_ACCOUNTS
from .context import Context, Section
from .envs import Envs


def overlay(base: ServiceDoc, top: ServiceDoc | None) -> ServiceDoc:
    """Fields set on `top` win over `base` (host over role)."""
    if top is None:
        return base
    # warnings off: a service's secret target ({file: ...}) is a tagged union pydantic's
    # serializer warns about, and dumps right
    merged = base.model_dump(by_alias=True, exclude_unset=True, warnings=False)
    merged.update(top.model_dump(by_alias=True, exclude_unset=True, warnings=False))
    return ServiceDoc.model_validate(merged, strict=False)


class Services(Section):
    def __init__(self, ctx: Context, envs: Envs):
        super().__init__(ctx)
        self.envs = envs

    def service(self, path: FieldPath, name: str, s: ServiceDoc) -> m.Service:
        entry = CATALOG.get(name)
        port = s.port or (entry.port if entry else None)
        if port is None:
            self.fail(path, f"service '{name}' is not in the catalog, so it needs a 'port' "
                      f"(catalog: {', '.join(CATALOG)})")
            port = 1
        command = s.command or (entry.command if entry else None)
        if command is None:
            self.fail(path, f"service '{name}' needs a 'command' (no catalog default for it)")
        logdir = s.logdir or (DEFAULT_LOGDIR if name == "tensorboard" else None)
        if command and "{logdir}" in command and logdir is None:
            self.fail((*path, "command"), "the command uses {logdir} but the service has no 'logdir'")
        if command and "{config}" in command and program(command) != "jupyter":
            self.fail((*path, "command"), "{config} is the rendered Jupyter config; only Jupyter "
                      "services can use it")
        if name == "firewall":
            self.fail(path, "the service name 'firewall' is reserved (provision-firewall.service "
                      "loads the host firewall)")
        user = s.user or service_account(name)
        if s.user is not None and s.user in self.ctx.logins():
            self.fail((*path, "user"), f"'{s.user}' is a login user of this inventory (it has "
                      "passwordless sudo: whoever reaches the service would be root); leave "
                      f"'user' out and it runs as its own account, {service_account(name)}")
        elif s.user is None and len(user) > ACCOUNT_MAX:
            self.fail(path, f"the service's own account would be '{user}', longer than "
                      f"{ACCOUNT_MAX} characters; give it a shorter name or a 'user'")
        for field, value in (("logdir", logdir), ("notebook_dir", s.notebook_dir)):
            parts = (value or "").split("/")
            if value and parts[1] == "home" and parts[2] != user:
                self.fail((*path, field), f"{value} is in /home/{parts[2]}, but the service runs "
                          f"as {user}: a data directory under /home must be its user's own")
        if command and "{notebook_dir}" in command and s.notebook_dir is None:
            self.fail((*path, "command"), "the command uses {notebook_dir} but the service has no 'notebook_dir'")
        if isinstance(s.expose, ExposeFrom):
            expose = m.Expose("public", tuple(s.expose.from_))
        else:
            expose = m.Expose(s.expose or "tunnel")
        group = s.group
        if group is not None and logdir is None:
            self.fail((*path, "group"), "'group' names who may write the service's logdir, "
                      "and the service has none")
        if group is not None and group in self.doc.team:
            self.fail((*path, "group"), f"'{group}' is a team member's name (each member has "
                      "a group of that name already); pick another group name")
        elif group is not None and (group in PRIVILEGED_GROUPS or group in RESERVED_ACCOUNTS):
            self.fail((*path, "group"), f"'{group}' is a group of the system (every team member "
                      "is added to a team directory's group, and this one grants more than the "
                      "directory); name a group of the team's own, e.g. 'ml'")
        venv, env = self.envs.service_venv(path, name, s, command)
        https = None
        if s.https is not None:
            zones = self.doc.dns.zones if self.doc.dns else {}
            https, problems = door.build(s.https, zones)
            for where, why in problems:
                self.fail((*path, "https", *where), why)
        is_jupyter = bool(command) and program(command) == "jupyter"
        if s.culling is not None and not is_jupyter:
            self.fail((*path, "culling"), "'culling' is for Jupyter servers (their idle kernels); "
                      "this service's command starts no jupyter")
        for spot, message in service_problems(path, s.environment, s.secrets, list(self.doc.secrets),
                                              s.per_user not in (None, False)):
            self.fail(spot, message)
        service = m.Service(name=name, port=port, bind=s.bind or DEFAULT_BIND, expose=expose,
                            command=command, user=user, logdir=logdir,
                            notebook_dir=s.notebook_dir, venv=venv, restart=s.restart,
                            scheme=entry.scheme if entry else "http", env=env,
                            memory_max=s.memory_max, group=group, own_account=s.user is None,
                            private_tmp=s.private_tmp is not False, https=https,
                            plain_http=s.plain_http,
                            culling=culling.resolve(s.culling) if is_jupyter else None,
                            environment=tuple(s.environment.items()),
                            secrets=tuple(m.SecretUse(k, v, None) if isinstance(v, str)
                                          else m.SecretUse(k, None, v.file)
                                          for k, v in s.secrets.items()))
        for where, why in door.service_problems(service, s.bind is not None):
            self.fail((*path, *where), why)
        return service

    def per_user(self, path: FieldPath, s: ServiceDoc, base: m.Service) -> tuple[m.Service, ...]:
        """The service itself, or with `per_user` one server per member (docs/tunnels.md)."""
        if s.per_user is None or s.per_user is False:
            if s.per_user_ports is not None:
                self.fail((*path, "per_user_ports"), "'per_user_ports' is for per_user servers; "
                          "add per_user")
            if s.per_user_socket is not None:
                self.fail((*path, "per_user_socket"), "'per_user_socket' is for per_user "
                          "servers; add per_user")
            return (base,)
        where: FieldPath = (*path, "per_user")
        if base.program != "jupyter":
            self.fail(where, "per_user is for Jupyter servers (the command must start jupyter)")
            return ()
        bad = {
            "user": s.user is not None and "each member's server runs as that member",
            "notebook_dir": s.notebook_dir is not None and "each member's notebooks are their home",
            "logdir": s.logdir is not None and "a per-user server has no logdir",
            "bind": not base.is_loopback and "a per-user server binds 127.0.0.1 (reached "
                                             "through the member's tunnel)",
            "expose": base.expose.kind != "tunnel" and "a per-user server is tunnel-only",
        }
        for f, why in bad.items():
            if why:
                self.fail((*path, f), f"'{f}' does not go with per_user: {why}")
        if any(bad.values()):
            return ()
        team = list(self.doc.team)
        per = s.per_user
        options: dict[str, MemberServiceDoc] = {}
        if per is True:
            members = team
            if not members:
                self.fail(where, "per_user: true gives every team member a server, but `team` "
                          "is empty")
        elif isinstance(per, list):
            members = list(dict.fromkeys(per))
        else:
            members = list(per)
            options = {k: v for k, v in per.items() if v is not None}
        for mem in members if not isinstance(per, bool) else ():
            if mem not in self.doc.team:
                key: str | int = per.index(mem) if isinstance(per, list) else mem
                close = difflib.get_close_matches(mem, team, n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                self.fail((*where, key), f"'{mem}' is not a team member{hint} (team: "
                          f"{', '.join(team) or 'none'})")
        members = [mem for mem in members if mem in self.doc.team]
        low, high = s.per_user_ports or DEFAULT_RANGE
        if low > high:
            self.fail((*path, "per_user_ports"), "per_user_ports must be [low, high]")
            return ()
        pins = {mem: o.port for mem, o in options.items() if o.port is not None}
        ports, clashes = allocate(members, pins, low, high)
        for c in clashes:
            self.fail((*where, c.member) if isinstance(per, dict) and c.member in per else where,
                      c.message)
        if clashes:
            return ()
        out = []
        for mem in members:
            o = options.get(mem) or MemberServiceDoc()
            if o.gpus is not None and len(set(o.gpus)) != len(o.gpus):
                self.fail((*where, mem, "gpus"), "a GPU is listed twice")
            out.append(replace(
                base, name=f"{base.name}@{mem}", member=mem, template=base.name, user=mem,
                own_account=False,
                socket=None if s.per_user_socket is False else member_socket(base.name, mem),
                port=ports[mem], local_port=base.port, notebook_dir=None,
                gpus=None if o.gpus is None else tuple(o.gpus),
                memory_max=o.memory_max or s.memory_max))
        return tuple(out)
