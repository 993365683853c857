"""Fact: the services' secret files under /etc/provision/credentials, as keyed
fingerprints only (`K:DIR` arguments). Pure parser.

The host keeps a random salt (root-only, `.salt`); each file is reported as
sha256(salt || content), never its content: the plan compares the fingerprint of the
value it would write, and a no-op sends nothing secret either way."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from provision.frozen import frozen

from .files import _mode
from .spec import FactsError, FactSpec, Rec

_HEX = frozenset("0123456789abcdef")


@frozen
class SecretFile:
    path: str
    mode: int
    owner: str
    fingerprint: str


@frozen
class Credentials:
    salt: str | None = None  # None: no salt yet (nothing delivered)
    files: dict[str, SecretFile] = field(default_factory=dict)  # regular files in the dirs
    dirs: dict[str, tuple[int, str]] = field(default_factory=dict)  # dir -> (mode, owner)


def _hex(value: str, rec: Rec, what: str) -> str:
    if not value or set(value) - _HEX:
        raise FactsError(f"line {rec.line}: bad {what}")
    return value


def parse(records: Sequence[Rec]) -> Credentials:
    salt: str | None = None
    files: dict[str, SecretFile] = {}
    dirs: dict[str, tuple[int, str]] = {}
    for r in records:
        f = r.fields
        if r.kind == "credsalt" and len(f) == 1:
            salt = None if f[0] == "absent" else _hex(f[0], r, "salt")
        elif r.kind == "creddir" and len(f) == 3:
            dirs[f[0]] = (_mode(f[1], r), f[2])
        elif r.kind == "credfile" and len(f) == 4:
            files[f[0]] = SecretFile(f[0], _mode(f[1], r), f[2], _hex(f[3], r, "fingerprint"))
        else:
            raise FactsError(f"line {r.line}: malformed {r.kind} record")
    return Credentials(salt, files, dirs)


SPEC = FactSpec("credentials", ("credsalt", "creddir", "credfile"), parse)
