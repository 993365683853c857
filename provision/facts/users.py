"""Fact: accounts (`U:` arguments) and every account whose authorized_keys we manage. Pure parser."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from provision.frozen import frozen

from .spec import FactsError, FactSpec, Rec, as_int

MARKER = "# Managed by provision"  # first line of every authorized_keys we write
CREATED_BY = "provision"  # the GECOS field of accounts we create
SERVICE_COMMENT = "provision service"  # ... and of a service's own account (svc-NAME)


@frozen
class UserFact:
    name: str
    uid: int
    group: str
    home: str
    shell: str
    expire: str  # shadow field 8, "" when unset
    groups: tuple[str, ...]
    comment: str = ""  # GECOS full name; ours say CREATED_BY

    @property
    def system(self) -> bool:
        """A system account (Debian: uid below 1000, or nobody)."""
        return self.uid < 1000 or self.uid == 65534

    @property
    def expired(self) -> bool:
        return self.expire not in ("", "-")


@frozen
class Users:
    users: dict[str, UserFact] = field(default_factory=dict)
    absent: frozenset[str] = frozenset()
    managed: tuple[str, ...] = ()  # accounts whose authorized_keys carries our marker
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)  # R: group -> members
    group_ids: dict[str, tuple[int, str | None]] = field(default_factory=dict)  # R: group -> (gid, the account whose primary group it is)


def parse(records: Sequence[Rec]) -> Users:
    users: dict[str, UserFact] = {}
    absent: set[str] = set()
    managed: list[str] = []
    groups: dict[str, tuple[str, ...]] = {}
    group_ids: dict[str, tuple[int, str | None]] = {}
    for r in records:
        f = r.fields
        if r.kind == "user":
            if len(f) not in (7, 8):
                raise FactsError(f"line {r.line}: malformed user record")
            users[f[0]] = UserFact(f[0], as_int(f[1], r, "uid"), f[2], f[3], f[4],
                                   "" if f[5] == "-" else f[5], tuple(g for g in f[6].split(",") if g),
                                   f[7] if len(f) == 8 else "")
        elif r.kind == "nouser":
            absent.add(f[0])
        elif r.kind == "managed":
            managed.append(f[0])
        elif r.kind == "group" and len(f) in (2, 4):
            groups[f[0]] = tuple(m for m in f[1].split(",") if m)
            if len(f) == 4:
                group_ids[f[0]] = (as_int(f[2], r, "gid"), None if f[3] == "-" else f[3])
    return Users(users, frozenset(absent), tuple(dict.fromkeys(managed)), groups, group_ids)


SPEC = FactSpec("users", ("user", "nouser", "managed", "group", "nogroup"), parse)
