"""Hosts and bastions: jump chains, roles merged in order (services, packages, ssh_from,
groups, kernel, sshd, apt sources), and the host's records built from them."""

from __future__ import annotations

import difflib
import ipaddress
from typing import Any

from .. import https as door
from .. import model as m
from .. import sshd_options as sshd
from ..apt_policy_doc import PackageEntry, merge_packages, merge_updates
from ..kernel_doc import merged_kernel, merged_sysctl
from ..schema import AptSourceDoc, BastionDoc, HostDoc, RoleDoc, ServiceDoc
from ..source import FieldPath
from .cloud import Cloud
from .context import Context, Section
from .envs import Envs
from .services import Services, overlay


class Hosts(Section):
    def __init__(self, ctx: Context, cloud: Cloud, services: Services, envs: Envs):
        super().__init__(ctx)
        self.cloud = cloud
        self.services = services
        self.envs = envs
        # Each distinct list of roles is merged, and its services validated, once: hosts
        # that only name roles share the result (errors point into `roles:`, reported once).
        self._merged: dict[tuple[str, ...], tuple[dict[str, tuple[FieldPath, ServiceDoc]],
                                                  list[PackageEntry], list[str], list[str]]] = {}
        self._resolved: dict[tuple[str, ...], tuple[m.Service, ...]] = {}

    def chain(self, path: FieldPath, node: HostDoc | BastionDoc) -> tuple[str, ...]:
        """Full ProxyJump chain, outermost first: the chain to reach via[0], then via."""
        if node.via is None:
            return ()
        direct = [node.via] if isinstance(node.via, str) else list(node.via)
        for i, name in enumerate(direct):
            if name not in self.doc.bastions:
                where = (*path, "via") if isinstance(node.via, str) else (*path, "via", i)
                close = difflib.get_close_matches(name, list(self.doc.bastions), n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                known = ", ".join(self.doc.bastions) or "none defined"
                self.fail(where, f"unknown bastion '{name}'{hint} (bastions: {known})")
                return ()
        visiting = [str(path[-1])] if path[0] == "bastions" else []
        prefix = self._prefix(direct[0], visiting, (*path, "via"))
        if prefix is None:
            return ()
        chain = [*prefix, *direct]
        if len(set(chain)) != len(chain) or (visiting and visiting[0] in chain):
            self.fail((*path, "via"), f"jump chain visits a bastion twice: {' -> '.join(chain)}")
            return ()
        return tuple(chain)

    def _prefix(self, name: str, visiting: list[str], where: FieldPath) -> list[str] | None:
        """Bastions in front of bastion `name`; None after reporting a cycle."""
        if name in visiting:
            self.fail(where, f"jump chain forms a cycle: {' -> '.join([*visiting, name])}")
            return None
        via = self.doc.bastions[name].via
        if via is None:
            return []
        direct = [via] if isinstance(via, str) else list(via)
        if any(n not in self.doc.bastions for n in direct):
            return []  # reported where that bastion itself is resolved
        prefix = self._prefix(direct[0], [*visiting, name], where)
        return None if prefix is None else [*prefix, *direct]

    def bastion(self, name: str, b: BastionDoc, chain: tuple[str, ...]) -> m.Host:
        d = self.doc.defaults
        egress = tuple(b.egress)
        if not egress:
            try:
                ip = ipaddress.ip_address(b.address)
                egress = (str(ipaddress.ip_network(ip)),)
            except ValueError:
                egress = ()
        return m.Host(name=name, address=b.address, user=b.user or d.user, port=b.port or d.port,
                      identity_file=b.identity_file or d.identity_file, jump_chain=chain,
                      is_bastion=True, ssh_from=tuple(b.allow_ssh_from), egress=egress,
                      public_address=b.public_address,
                      security_groups=self.cloud.attached(("bastions", name), b.security_groups),
                      instance=self.cloud.instance(("bastions", name), b.aws, b.address),
                      sshd=sshd.merged(self.sshd_layers(name))[0])

    def _roles(self, path: FieldPath, roles: tuple[str, ...]) -> tuple[
            dict[str, tuple[FieldPath, ServiceDoc]], list[PackageEntry], list[str], list[str]]:
        """The roles' services, packages, ssh_from and security groups, merged in order;
        computed once per distinct list of (known) roles."""
        cached = self._merged.get(roles)
        if cached is not None:
            return cached
        services: dict[str, tuple[FieldPath, ServiceDoc]] = {}
        packages: list[PackageEntry] = []
        ssh_from: list[str] = []
        groups: list[str] = []
        known = True
        for i, role in enumerate(roles):
            r = self.doc.roles.get(role)
            if r is None:
                close = difflib.get_close_matches(role, list(self.doc.roles), n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                self.fail((*path, "roles", i), f"unknown role '{role}'{hint} "
                          f"(roles: {', '.join(self.doc.roles) or 'none defined'})")
                known = False
                continue
            for sname, sdoc in r.services.items():
                base = services.get(sname, (("roles", role, "services", sname), ServiceDoc()))[1]
                services[sname] = (("roles", role, "services", sname), overlay(base, sdoc))
            packages += [p for p in r.packages if p not in packages]
            ssh_from += [c for c in r.ssh_from if c not in ssh_from]
            groups += [g for g in self.cloud.attached(("roles", role), r.security_groups) if g not in groups]
        merged = (services, packages, ssh_from, groups)
        if known:  # an unknown role is this host's error: reported at each host that names it
            self._merged[roles] = merged
        return merged

    def host(self, name: str, h: HostDoc) -> m.Host:
        d = self.doc.defaults
        path: FieldPath = ("hosts", name)
        roles = tuple(h.roles)
        role_services, role_packages, role_ssh_from, role_groups = self._roles(path, roles)
        services = dict(role_services)
        packages = list(role_packages)
        ssh_from = list(role_ssh_from)
        groups = list(role_groups)
        for sname, sdoc in h.services.items():
            base = services.get(sname, (path, ServiceDoc()))[1]
            services[sname] = ((*path, "services", sname), overlay(base, sdoc))
        packages += [p for p in h.packages if p not in packages]
        names, pins = merge_packages(packages)
        updates = merge_updates([*(self.doc.roles[r].updates for r in roles if r in self.doc.roles),
                                 h.updates])
        ssh_from += [c for c in h.ssh_from if c not in ssh_from]
        groups += [g for g in self.cloud.attached(path, h.security_groups) if g not in groups]
        if not h.services and roles in self._merged:  # services from the roles alone: once
            resolved = self._resolved.get(roles)
            if resolved is None:
                resolved = self._resolved[roles] = tuple(
                    x for sname, (sp, sd) in services.items()
                    for x in self.services.per_user(sp, sd, self.services.service(sp, sname, sd)))
        else:
            resolved = tuple(x for sname, (sp, sd) in services.items()
                             for x in self.services.per_user(sp, sd, self.services.service(sp, sname, sd)))
        self._accounts_apart(path, resolved)
        for sname, why in door.host_problems(resolved, h.port or d.port).items():
            where = services[sname][0] if sname in services else path
            self.fail((*where, "https", "port"), why)
        return m.Host(name=name, address=h.address, user=h.user or d.user, port=h.port or d.port,
                      identity_file=h.identity_file or d.identity_file,
                      jump_chain=self.chain(path, h), roles=roles,
                      ssh_from=tuple(ssh_from), services=resolved, packages=names,
                      package_pins=pins, updates=updates,
                      apt_sources=self._apt_sources(path, roles, h),
                      security_groups=tuple(groups), instance=self.cloud.instance(path, h.aws, h.address),
                      python_envs=self.envs.host_envs(roles, h, resolved),
                      ephemeral_ports=(h.ephemeral_ports[0], h.ephemeral_ports[1])
                      if h.ephemeral_ports else None, sshd=sshd.merged(self.sshd_layers(name))[0],
                      public_address=h.public_address, **self._kernel(roles, h))

    def _kernel(self, roles: tuple[str, ...], h: HostDoc) -> dict[str, Any]:
        """`sysctl:` and `kernel:` merged: the roles in order, then the host."""
        layers = [r for r in (self.doc.roles.get(n) for n in roles) if r is not None]
        cores, modules = merged_kernel([*(r.kernel for r in layers), h.kernel])
        docs: list[RoleDoc | HostDoc] = [*layers, h]
        sysctl = merged_sysctl({k: None if v is None else str(v) for k, v in x.sysctl.items()}
                               for x in docs)
        return {"sysctl": sysctl, "core_dumps": cores, "kernel_modules": modules}

    def sshd_layers(self, name: str) -> list[tuple[FieldPath, sshd.SshdDoc | None]]:
        """A node's `sshd:` docs, lowest first: its roles' in order, then its own."""
        d = self.doc
        if name in d.bastions:
            return [(("bastions", name), d.bastions[name].sshd)]
        h = d.hosts[name]
        return [*((("roles", r), d.roles[r].sshd) for r in h.roles if r in d.roles),
                (("hosts", name), h.sshd)]

    def _accounts_apart(self, path: FieldPath, services: tuple[m.Service, ...]) -> None:
        """Two services of one host never share an own account (`My.Board` and `my-board`
        would both be svc-my-board): each keeps what it writes from the other."""
        seen: dict[str, str] = {}
        for s in services:
            if s.own_account and seen.setdefault(s.user, s.name) != s.name:
                self.fail((*path, "services", s.name), f"services '{seen[s.user]}' and '{s.name}' "
                          f"would both run as {s.user}; rename one or give it a 'user'")


    def _apt_sources(self, path: FieldPath, roles: tuple[str, ...], h: HostDoc) -> tuple[m.AptSource, ...]:
        """The roles' apt sources in order, then the host's; a later one of the same name
        wins. Two names for one repository (URI and suite) are refused: apt fails on the host
        when their Signed-By differ ("Conflicting values set for option Signed-By")."""
        merged: dict[str, tuple[FieldPath, AptSourceDoc]] = {}
        for role in roles:
            r = self.doc.roles.get(role)
            if r is not None:  # an unknown role is reported where the host names it
                merged.update({n: (("roles", role, "apt_sources", n), d) for n, d in r.apt_sources.items()})
        merged.update({n: ((*path, "apt_sources", n), d) for n, d in h.apt_sources.items()})
        seen: dict[tuple[str, str], str] = {}
        for name, (where, d) in merged.items():
            for suite in d.suites:
                other = seen.setdefault((d.uri.rstrip("/"), suite), name)
                if other != name:
                    self.fail(where, f"apt source '{name}' repeats '{other}' ({d.uri} {suite}) "
                              f"for host '{path[-1]}'; apt refuses one repository under two keys")
        return tuple(m.AptSource(name, d.uri, tuple(d.suites), tuple(d.components), d.key,
                                 d.fingerprint) for name, (_, d) in merged.items())
