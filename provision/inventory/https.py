"""A public service's front door in the inventory (`https:` and `plain_http:` on a
service): the YAML fields and the pure checks that make them a `model.Https`.

Every value lands in the proxy's config or key map on the host, so each is checked as
strictly as a name: the FQDN (and that it lies in a zone of `dns:`), client names, key
digests (`sha256:` and 64 hex digits: only digests are ever kept), rates (`N/s`, `N/min`).
See docs/door.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, StrictStr

from provision.text import printable, unsafe

from . import model as m
from .fields import Name, Port, is_hostname

DIGEST_PREFIX = "sha256:"
_DIGEST = re.compile(r"^sha256:([0-9A-Fa-f]{64})$")
_RATE = re.compile(r"^([1-9][0-9]{0,5})/(s|min)$")
_PERIODS = {"s": 1, "min": 60}
DEFAULT_PORT = 443


def check_fqdn(value: str) -> str:
    if unsafe(value) or not is_hostname(value) or "." not in value.rstrip(".") or "_" in value:
        raise ValueError(f"invalid name {printable(value)!r} (a DNS name of letters, digits "
                         "and '-' with at least two labels, e.g. api.example.org)")
    return value.rstrip(".").lower()


def check_digest(value: str) -> str:
    if not _DIGEST.match(value):
        raise ValueError(f"not a key hash: {printable(value)[:80]!r} (give 'sha256:' and the 64 "
                         "hex digits of the key's SHA-256, as `provision keys new` prints; "
                         "never the key itself)")
    return value.lower()


def check_rate(value: str) -> str:
    if not _RATE.match(value):
        raise ValueError(f"invalid rate {printable(value)[:40]!r} (N/s or N/min, N from 1 to "
                         "999999, e.g. 5/s or 300/min)")
    return value


def check_reason(value: str) -> str:
    bad = unsafe(value)
    if bad:
        raise ValueError(f"a reason must not contain control, format or invisible characters "
                         f"(found {printable(bad)!r})")
    if len(value.strip()) < 8:
        raise ValueError("say why this service must be plain HTTP on the internet (at least "
                         "8 characters)")
    return value


Fqdn = Annotated[StrictStr, AfterValidator(check_fqdn)]
Digest = Annotated[StrictStr, AfterValidator(check_digest)]
Rate = Annotated[StrictStr, AfterValidator(check_rate)]
Reason = Annotated[StrictStr, Field(max_length=300), AfterValidator(check_reason)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class LimitsDoc(_Strict):
    per_key: Rate = Field("10/s", description="requests each client key may make (N/s or N/min)")
    per_address: Rate = Field(
        "20/s", description="requests each source address may make, with or without a valid key "
                            "(a wrong or missing key counts too: keys cannot be guessed at line rate)")
    burst: Annotated[StrictInt, Field(ge=1, le=1000000)] | None = Field(
        None, description="requests a client may make at once before the rate applies (default: "
                          "the rate's N); the counters' window is burst / rate")
    connections: Annotated[StrictInt, Field(ge=1, le=10000)] = Field(
        20, description="connections one source address may hold open at once (a slow client "
                        "cannot hold the door)")


class HttpsDoc(_Strict):
    name: Fqdn = Field(description="the name clients use; it must lie in a zone of `dns:`")
    port: Port = Field(DEFAULT_PORT, description="the door's port (the firewall opens this one, "
                                                 "not the service's)")
    keys: dict[Name, Digest] = Field(
        default_factory=dict, description="client (a team member or a named client) -> "
                                          "'sha256:<64 hex>' of its API key (`provision keys new`)")
    limits: LimitsDoc = Field(default_factory=LimitsDoc)


def rate(text: str) -> m.Rate:
    match = _RATE.match(text)
    assert match, text  # checked by the schema
    return m.Rate(int(match.group(1)), _PERIODS[match.group(2)])


def zone_of(name: str, zones: Iterable[str]) -> str | None:
    """The most specific of `zones` that holds `name`, or None."""
    holding = [z for z in zones if name == z or name.endswith("." + z)]
    return max(holding, key=len) if holding else None


def build(doc: HttpsDoc, zones: Iterable[str]) -> tuple[m.Https | None, list[tuple[tuple[str, ...], str]]]:
    """The model of `doc` and the problems (relative field path, message)."""
    problems: list[tuple[tuple[str, ...], str]] = []
    zone_names = sorted(zones)
    zone = zone_of(doc.name, zone_names)
    if zone is None:
        known = ", ".join(zone_names) or "none: add the zone to `dns:`"
        problems.append((("name",), f"{doc.name} is in no zone of the inventory's dns (zones: "
                                    f"{known}); the certificate is issued through that zone"))
    seen: dict[str, str] = {}
    for client, digest in doc.keys.items():
        if digest in seen:
            problems.append((("keys", client), f"the same key hash as '{seen[digest]}': each "
                                               "client needs a key of its own"))
        seen.setdefault(digest, client)
    limits = doc.limits
    per_key, per_address = rate(limits.per_key), rate(limits.per_address)
    if problems:
        return None, problems
    keys = tuple(m.ApiKey(client, digest[len(DIGEST_PREFIX):]) for client, digest in sorted(doc.keys.items()))
    return m.Https(name=doc.name, zone=zone or "", port=doc.port, keys=keys,
                   limits=m.Limits(per_key, per_address, limits.burst, limits.connections)), []


def service_problems(service: m.Service, explicit_bind: bool) -> list[tuple[tuple[str, ...], str]]:
    """What does not go with a door (or with an opt-out) on one service."""
    out: list[tuple[tuple[str, ...], str]] = []
    h = service.https
    if h is not None:
        if service.plain_http is not None:
            out.append((("plain_http",), "a service behind the door is not plain HTTP; remove "
                                         "'plain_http' or 'https'"))
        if service.expose.kind != "public":
            out.append((("https",), "the door is public: give 'expose: {from: [CIDR, ...]}' "
                                    "(who reaches the door, e.g. [0.0.0.0/0, '::/0'])"))
        if explicit_bind and not service.is_loopback:
            out.append((("bind",), f"a service behind the door binds loopback (127.0.0.1), not "
                                   f"{service.bind}: only the door is reachable from outside"))
        if h.port == service.port:
            out.append((("https", "port"), f"the door's port {h.port} is the service's own port; "
                                           "the service listens on 127.0.0.1 behind it on another"))
    elif service.plain_http is not None and service.expose.kind != "public":
        out.append((("plain_http",), "'plain_http' is the reason a public service has no door; "
                                     "this service is not public (expose: {from: [...]})"))
    return out


def host_problems(services: Iterable[m.Service], ssh_port: int) -> Mapping[str, str]:
    """Service name -> problem, for doors of one host that cannot share it."""
    out: dict[str, str] = {}
    by_port: dict[int, str] = {}
    ports = {s.port: s.name for s in services}
    for s in services:
        if s.https is None:
            continue
        p = s.https.port
        if p == ssh_port:
            out[s.name] = f"the door's port {p} is the host's ssh port"
        elif p in ports and ports[p] != s.name:
            out[s.name] = f"the door's port {p} is service '{ports[p]}''s port"
        elif p in by_port:
            out[s.name] = (f"service '{by_port[p]}' has a door on port {p} already (one door "
                           "per port on a host: give this one another 'https.port')")
        by_port.setdefault(p, s.name)
    return out
