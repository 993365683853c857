"""Fact: the door on the host (provision.door): its certificates and what each port of
the live config really serves, read on loopback (the config digest the door sends back to
the host, the certificate it presents). Pure parser."""

from __future__ import annotations

import re
from collections.abc import Sequence

from provision.frozen import frozen

from .spec import FactSpec, Rec, number

_HEX = re.compile(r"^[0-9A-Fa-f]{16,64}$")
_NAME = re.compile(r"^[a-z0-9.-]{1,253}$")


@frozen
class CertFact:
    name: str
    fingerprint: str | None  # SHA-256 of fullchain.pem's first certificate, lower-case hex
    not_after: int | None  # unix seconds
    self_signed: bool  # the door's own placeholder, until a CA's certificate is installed
    has_key: bool  # privkey.pem
    has_combined: bool  # haproxy.pem


@frozen
class ServedFact:
    port: int
    digest: str | None  # the config digest the door sends back on loopback; None: no answer
    fingerprint: str | None  # the certificate it presents


@frozen
class DoorFact:
    certs: dict[str, CertFact]
    served: dict[int, ServedFact]


def _hex(value: str) -> str | None:
    return value.lower() if _HEX.match(value) else None


def parse(records: Sequence[Rec]) -> DoorFact:
    certs: dict[str, CertFact] = {}
    served: dict[int, ServedFact] = {}
    for r in records:
        f = r.fields
        if len(f) == 7 and f[0] == "cert" and _NAME.match(f[1]):
            certs[f[1]] = CertFact(f[1], _hex(f[2]), number(f[3]), f[4] == "1", f[5] == "1",
                                   f[6] == "1")
        elif len(f) == 4 and f[0] == "served" and (port := number(f[1], 65535)):
            served[port] = ServedFact(port, _hex(f[2]), _hex(f[3]))
    return DoorFact(certs, served)


SPEC = FactSpec("door", ("door",), parse)
