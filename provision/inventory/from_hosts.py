"""Records generated from the hosts: a zone's `from_hosts` gives every host (or the hosts
of listed roles) an A or AAAA record from its `address` (in a public zone, its
`public_address` when it has one: `record_address`). Pure, no I/O.

`build` turns the result into model records beside the declared ones, so they are
planned, applied, owned (ownership markers) and checked like declared records; it also
refuses a generated name that a declared record (or another host) already has.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Literal

from provision.dnsdata.names import BadName, canonical, check_record
from provision.frozen import frozen

from .fields import is_ip

PLACEHOLDER = "{host}"


@frozen
class Spec:
    roles: tuple[str, ...] | None   # None: every host
    name: str                       # the record name template, relative to the zone
    ttl: int


@frozen
class HostIn:
    name: str
    address: str
    roles: tuple[str, ...]


@frozen
class Generated:
    host: str
    name: str       # relative to the zone, as the template made it
    fqdn: str       # absolute, lowercase, trailing dot
    type: Literal["A", "AAAA"]
    value: str
    ttl: int


def record_address(address: str, public_address: str | None, visibility: str) -> str:
    """The address a host's generated record holds: in a public zone its `public_address`
    when it declares one (the address the internet reaches it at: NAT, elastic IP), else
    its `address`; a private zone is read inside the network, where `address` is right."""
    return public_address if public_address and visibility == "public" else address


def template_problem(template: str) -> str:
    """Why `template` is not a record name template, or ""."""
    if template.count(PLACEHOLDER) != 1:
        return (f"the name '{template}' must hold '{PLACEHOLDER}' exactly once (every host "
                "gets a name of its own)")
    rest = template.replace(PLACEHOLDER, "")
    if "{" in rest or "}" in rest:
        return f"the name '{template}' has a placeholder other than '{PLACEHOLDER}'"
    return ""


def generate(zone: str, spec: Spec, hosts: Iterable[HostIn]) -> tuple[list[Generated], list[tuple[str, str]]]:
    """The records `spec` gives the hosts of `zone`, and (host, why) for each host that
    would get one but cannot (its address is a DNS name, or the name is not one provision
    manages). The template must be valid (`template_problem`)."""
    out: list[Generated] = []
    problems: list[tuple[str, str]] = []
    for h in hosts:
        if spec.roles is not None and not set(spec.roles) & set(h.roles):
            continue
        name = spec.name.replace(PLACEHOLDER, h.name)
        try:
            fq = check_record(name, zone)
        except BadName as e:
            problems.append((h.name, f"the generated name '{name}' ({canonical(name, zone)}): {e}"))
            continue
        if not is_ip(h.address):
            problems.append((h.name, f"its address {h.address} is a DNS name, not an IP "
                             "address: from_hosts makes A/AAAA records from addresses (give "
                             "the zone's from_hosts roles that leave this host out)"))
            continue
        ip = ipaddress.ip_address(h.address)
        out.append(Generated(h.name, name, fq, "A" if ip.version == 4 else "AAAA", str(ip),
                             spec.ttl))
    return out, problems
