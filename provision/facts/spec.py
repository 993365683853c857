"""What a fact is: a shell fragment that prints tab-separated records, and a pure parser.

Pure, no I/O. A fact spec names the record kinds it owns; the probe (`provision.facts.probe`)
batches the fragments of every requested fact into one script, one round trip per host, and
hands each parser the records of its kinds. A new fact is one module with a `SPEC`, one
fragment in `templates/facts/`, one line in `provision.facts.registry`, and fixtures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from provision.errors import OperationError
from provision.frozen import frozen

T = TypeVar("T")


class FactsError(OperationError):
    """The probe's answer could not be understood."""


@frozen
class Rec:
    """One record of the probe's answer: its line number, kind and tab-separated fields."""

    line: int
    kind: str
    fields: tuple[str, ...]
    raw: str  # everything after the kind and its tab (some records carry free text)


@frozen
class FactSpec(Generic[T]):
    name: str  # also the fragment's file name (templates/facts/NAME.sh) and its shell function
    kinds: tuple[str, ...]  # record kinds this fact parses
    parse: Callable[[Sequence[Rec]], T]  # pure; gets [] when the fact was not probed


def number(value: str, most: int = 2**63 - 1) -> int | None:
    """`value` as a non-negative integer when it is ASCII digits (not "²" or "١", which
    str.isdigit accepts and int() may refuse) of at most `most`; else None."""
    if not (value.isascii() and value.isdigit()) or len(value) > 19:
        return None
    n = int(value)
    return n if n <= most else None


def as_int(value: str, rec: Rec, what: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise FactsError(f"line {rec.line}: bad {what} {value!r}") from None


@frozen
class Request:
    """What the steps want to know. Order is kept; duplicates are dropped when merged.

    Paths, users, units and packages are arguments to the probe; `facts` names further
    specs to run (those without arguments: system, sockets, ...).
    """

    files: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()  # list files whose path starts with this
    users: tuple[str, ...] = ()
    units: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    sshd_users: tuple[str, ...] = ()  # `sshd -T -C user=...` for these (sshd_effective)
    guards: tuple[str, ...] = ()  # `G:...` arguments of shell steps' guards (provision.facts.guards)
    groups: tuple[str, ...] = ()  # groups and their members (`R:`, the users fact)
    member_sockets: tuple[str, ...] = ()  # `MEMBER:SOCKET` of members' own servers (`J:`, jupyter_auth)
    credentials: tuple[str, ...] = ()  # services' secret directories (`K:`, credentials)

    def merge(self, other: Request) -> Request:
        def m(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(dict.fromkeys((*a, *b)))
        return Request(m(self.files, other.files), m(self.dirs, other.dirs),
                       m(self.prefixes, other.prefixes), m(self.users, other.users),
                       m(self.units, other.units), m(self.packages, other.packages),
                       m(self.facts, other.facts), m(self.sshd_users, other.sshd_users),
                       m(self.guards, other.guards), m(self.groups, other.groups),
                       m(self.member_sockets, other.member_sockets),
                       m(self.credentials, other.credentials))

    def args(self) -> list[str]:
        return ([f"F:{p}" for p in self.files] + [f"D:{p}" for p in self.dirs]
                + [f"L:{p}" for p in self.prefixes] + [f"U:{u}" for u in self.users]
                + [f"S:{u}" for u in self.units] + [f"P:{p}" for p in self.packages]
                + [f"C:{u}" for u in self.sshd_users] + list(self.guards)
                + [f"R:{g}" for g in self.groups] + [f"J:{j}" for j in self.member_sockets]
                + [f"K:{d}" for d in self.credentials])

    def spec_names(self) -> frozenset[str]:
        """The specs whose fragments this request needs."""
        names = set(self.facts)
        if self.files or self.dirs or self.prefixes:
            names.add("files")
        if self.users or self.groups:
            names |= {"users", "files"}
        if self.units:
            names.add("units")
        if self.packages:
            names.add("packages")
        if self.sshd_users:
            names.add("sshd_effective")
        if self.guards:
            names.add("guards")
        if self.member_sockets:
            names.add("jupyter_auth")
        if self.credentials:
            names.add("credentials")
        return frozenset(names)
