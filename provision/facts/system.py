"""Fact: who we run as, the OS, Docker and the tools present. Pure parser (the GPUs are
`provision.facts.gpus`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from provision.frozen import frozen

from .spec import FactSpec, Rec, as_int


@frozen
class System:
    uid: int = -1
    os: dict[str, str] = field(default_factory=dict)
    docker: bool = False
    has: frozenset[str] = frozenset()
    caps: dict[str, bool] = field(default_factory=dict)  # systemd, apt: absent = not probed


def parse(records: Sequence[Rec]) -> System:
    uid, os_, docker = -1, {}, False
    has: set[str] = set()
    caps: dict[str, bool] = {}
    for r in records:
        f = r.fields
        if r.kind == "id":
            uid = as_int(f[0], r, "uid")
        elif r.kind == "os":
            os_ = dict(zip(("id", "version_id", "pretty_name", "id_like"), f, strict=False))
        elif r.kind == "docker":
            docker = f[0] == "yes"
        elif r.kind == "has":
            has.add(f[0])
        elif r.kind == "cap" and len(f) == 2:
            caps[f[0]] = f[1] == "yes"
    return System(uid, os_, docker, frozenset(has), caps)


SPEC = FactSpec("system", ("id", "os", "docker", "has", "cap"), parse)
