"""`Facts`: what the probe found on one host, one value per fact spec. Pure data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any, TypeVar

from provision.frozen import frozen

from . import files as F
from . import gpus as G
from . import packages as P
from . import sockets as S
from . import system as Y
from . import units as N
from . import users as U
from .spec import FactSpec

T = TypeVar("T")


@frozen
class Facts:
    values: Mapping[str, Any] = field(default_factory=dict)

    def get(self, spec: FactSpec[T]) -> T:
        """The value of any fact; a fact that was not probed parses as empty."""
        if spec.name in self.values:
            value: T = self.values[spec.name]
            return value
        return spec.parse([])

    @classmethod
    def of(cls, *, uid: int = 0, files: dict[str, F.FileFact] | None = None,
           dirs: dict[str, F.DirFact] | None = None, units: dict[str, N.UnitFact] | None = None,
           users: dict[str, U.UserFact] | None = None, docker: bool = False,
           packages: dict[str, P.PackageFact] | None = None) -> Facts:
        """Facts from plain values (fixtures in tests, facts built by hand)."""
        return cls({
            "system": Y.System(uid=uid, docker=docker),
            "files": F.Files(files or {}, dirs or {}),
            "users": U.Users(users or {}),
            "units": units or {},
            "packages": packages or {},
        })

    # the core facts, named for the steps that read them
    @property
    def uid(self) -> int:
        return self.get(Y.SPEC).uid

    @property
    def os(self) -> dict[str, str]:
        return self.get(Y.SPEC).os

    @property
    def docker(self) -> bool:
        return self.get(Y.SPEC).docker

    @property
    def gpus(self) -> G.Gpus:
        return self.get(G.SPEC)

    @property
    def has(self) -> frozenset[str]:
        return self.get(Y.SPEC).has

    @property
    def files(self) -> dict[str, F.FileFact]:
        return self.get(F.SPEC).files

    @property
    def dirs(self) -> dict[str, F.DirFact]:
        return self.get(F.SPEC).dirs

    @property
    def temps(self) -> tuple[str, ...]:
        return self.get(F.SPEC).temps

    @property
    def users(self) -> dict[str, U.UserFact]:
        return self.get(U.SPEC).users

    @property
    def absent_users(self) -> frozenset[str]:
        return self.get(U.SPEC).absent

    @property
    def groups(self) -> dict[str, tuple[str, ...]]:
        """Groups asked for (`Request.groups`) that exist, with their members."""
        return self.get(U.SPEC).groups

    @property
    def group_ids(self) -> dict[str, tuple[int, str | None]]:
        """Groups asked for that exist: their gid and the account whose own group each is."""
        return self.get(U.SPEC).group_ids

    @property
    def managed_users(self) -> tuple[str, ...]:
        return self.get(U.SPEC).managed

    @property
    def units(self) -> dict[str, N.UnitFact]:
        return self.get(N.SPEC)

    @property
    def packages(self) -> dict[str, P.PackageFact]:
        return self.get(P.SPEC)

    @property
    def listening(self) -> tuple[S.Socket, ...]:
        return self.get(S.SPEC)

    def file(self, path: str) -> F.FileFact:
        return self.files.get(path, F.FileFact(path, "absent"))

    def dir(self, path: str) -> F.DirFact:
        return self.dirs.get(path, F.DirFact(path, "absent"))

    def prefixed(self, prefix: str) -> tuple[F.FileFact, ...]:
        return tuple(f for p, f in sorted(self.files.items()) if p.startswith(prefix) and f.exists)
