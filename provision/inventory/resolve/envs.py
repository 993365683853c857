"""Python envs: the table of every declared env (one requirement set per name), the envs a
host gets, and the virtualenv a service runs in."""

from __future__ import annotations

from typing import Any

from .. import model as m
from ..catalog import CATALOG, DEFAULT_ENVS
from ..python_envs import PythonEnv, duplicate_package, summary
from ..schema import HostDoc, ServiceDoc
from ..source import FieldPath
from .context import Context, Section


class Envs(Section):
    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self._envs = self._env_table()

    def _env_table(self) -> dict[str, tuple[FieldPath, PythonEnv]]:
        """Every declared python env by name (top level, roles, hosts). A name has one
        requirement set in the whole inventory: a second one is an error naming both places."""
        d = self.doc
        places: list[tuple[FieldPath, dict[str, Any]]] = [
            (("python_envs",), d.python_envs),
            *((("roles", r, "python_envs"), rd.python_envs) for r, rd in d.roles.items()),
            *((("hosts", h, "python_envs"), hd.python_envs) for h, hd in d.hosts.items())]
        table: dict[str, tuple[FieldPath, PythonEnv]] = {}
        for base, envs in places:
            for name, e in envs.items():
                where: FieldPath = (*base, name)
                dup = duplicate_package(e.packages)
                if dup is not None:
                    self.fail((*where, "packages", dup[1]), f"{e.packages[dup[1]]} is about the "
                              f"same package as packages[{dup[0]}] ({e.packages[dup[0]]}); give "
                              "each package once, with every condition in one requirement")
                    continue
                env = PythonEnv.of(name, e.packages, e.python, e.index_url, e.extra_index_urls)
                first = table.get(name)
                if first is None:
                    table[name] = (where, env)
                elif first[1] != env:
                    pos = self.source.where(first[0])
                    self.fail(where, f"python env '{name}' is also declared at {pos.file}:"
                              f"{pos.line} with another requirement set ({summary(first[1])}; "
                              f"here: {summary(env)}); an env name has one requirement set "
                              "in the whole inventory: rename one of them")
        return table

    def _env(self, name: str) -> PythonEnv | None:
        """The declared env `name`, else the catalog's default of that name, else None."""
        if name in self._envs:
            return self._envs[name][1]
        packages = DEFAULT_ENVS.get(name)
        return PythonEnv.of(name, packages) if packages else None

    def host_envs(self, roles: tuple[str, ...], h: HostDoc,
                   services: tuple[m.Service, ...]) -> tuple[PythonEnv, ...]:
        """The envs a host gets: the top level's, its roles', its own, then those its
        services name (a catalog default included)."""
        names = [*self.doc.python_envs,
                 *(n for r in roles if r in self.doc.roles for n in self.doc.roles[r].python_envs),
                 *h.python_envs, *(s.env for s in services if s.env)]
        envs = (self._env(n) for n in dict.fromkeys(names))
        return tuple(e for e in envs if e is not None)

    def service_venv(self, path: FieldPath, name: str, s: ServiceDoc,
                      command: str | None) -> tuple[str | None, str | None]:
        """(the virtualenv directory, the python env's name) of a service: `venv:` as a path
        or an env name; none given, the catalog's default env when the command uses {venv}."""
        entry = CATALOG.get(name)
        env = None
        if s.venv is None and entry and entry.env and command and "{venv}" in command:
            env = entry.env
        elif s.venv is not None and not s.venv.startswith("/"):
            env = s.venv
        if env is None:
            return s.venv, None
        found = self._env(env)
        if found is None:
            known = ", ".join(sorted({*self._envs, *DEFAULT_ENVS}))
            self.fail((*path, "venv"), f"unknown python env '{env}' (declared in python_envs "
                      f"or a catalog default: {known}); or give the absolute path of a virtualenv")
            return None, None
        return found.path, env
