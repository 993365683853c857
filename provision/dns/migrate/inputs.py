"""What the operator types into `dns migrate`, checked before anything is read or sent:
the NAME (its zone), the `--to` values, and who the operator is (for the marker).

Pure but for `who` (the user and host name). UsageError (exit 2) for bad input.
"""

from __future__ import annotations

import getpass
import ipaddress
import os
import re
import socket
from collections.abc import Sequence

from provision.dns.rrset import RRset, in_zone, normalise_value
from provision.dnsdata import names
from provision.dnsdata.rdata import value_problem
from provision.errors import UsageError
from provision.inventory.model import Inventory, Zone
from provision.text import printable

from . import closed as C


def who() -> str:
    """The operator, ``$USER@hostname`` (short host name), cut to what a marker may hold."""
    try:
        user = os.environ.get("USER") or getpass.getuser()
    except (KeyError, OSError):
        user = ""
    host = socket.gethostname().split(".")[0]
    user = re.sub(r"[^A-Za-z0-9._-]", "_", user)[:32] or "unknown"
    host = re.sub(r"[^A-Za-z0-9.-]", "-", host)[:63] or "unknown"
    return f"{user}@{host}"



def find_zone(inv: Inventory, name: str) -> tuple[Zone, str]:
    """The inventory zone holding `name` (the longest match) and the absolute name.
    UsageError (exit 2) for a name in no zone, or one provision refuses to migrate
    (reserved marker labels, too long for its marker, characters a host name lacks)."""
    zones = {z.name: z for z in inv.dns.zones} if inv.dns else {}
    try:
        zone_name, fq = names.cli_name(name, list(zones))
    except names.BadName as e:
        raise UsageError(f"'{printable(name)}' {e}") from None
    found = zones[zone_name], fq
    why = names.problem(found[1], room=names.MARKER_ROOM) or names.reserved(found[1])
    if why:
        raise UsageError(f"{printable(name)}: {why}")
    return found



def validate_values(rtype: str, values: Sequence[str]) -> tuple[str, ...]:
    out = []
    for v in values:
        if not v or any(c.isspace() or ord(c) < 32 or c in "\"'\\;" for c in v):
            raise UsageError(f"--to {v!r}: not a valid {rtype} value")
        if rtype in ("A", "AAAA"):
            try:
                addr = ipaddress.ip_address(v)
            except ValueError:
                raise UsageError(f"--to {v}: not an IPv{4 if rtype == 'A' else 6} address, "
                                 f"and the record is {rtype}") from None
            if "%" in v or addr.version != (4 if rtype == "A" else 6):
                raise UsageError(f"--to {v}: not an IPv{4 if rtype == 'A' else 6} address, "
                                 f"and the record is {rtype}")
        elif rtype == "CNAME":
            why = value_problem("CNAME", v)
            if why:  # a single label would be a top-level domain: refused, not guessed
                raise UsageError(f"--to {printable(v)}: {why} (a CNAME points at an absolute "
                                 "host name such as lb-2.example.org)")
        out.append(normalise_value(rtype, v))
    if rtype == "CNAME" and len(set(out)) != 1:
        raise UsageError("a CNAME holds exactly one target: give one --to")
    values = tuple(sorted(set(out)))
    try:  # what the closed record at finalize must hold, by the rules it is read with
        C.check_values(rtype, values, "--to")
    except C.ClosedError as e:
        raise UsageError(f"{e}: a finished migration's record could not hold it") from None
    return values


def alias_message(where: str, zone: str, rr: RRset) -> str:
    """Why a Route53 alias cannot be migrated, and what to do instead."""
    a = rr.alias
    assert a is not None  # called for an alias only
    target = a.dns_name.rstrip(".").lower() + "."
    same_zone = in_zone(target, zone)
    if same_zone:
        return (f"{where} {rr.type} is a Route53 alias to {target}: an alias has no TTL of "
                f"its own (resolvers cache it for the target's TTL). Migrate the target "
                f"instead: provision dns migrate start {target} --to …")
    return (f"{where} {rr.type} is a Route53 alias to {target} (an AWS resource): an "
            "alias has no TTL of its own and the target's TTL is set by AWS, so it cannot be "
            "lowered; change the alias with `provision dns apply` and expect caches to hold "
            "the old target for the AWS-set TTL (60 s for load balancers)")
