"""Fact: the kernel settings the socket report reads (`sysctl -n`). Pure parser."""

from __future__ import annotations

from collections.abc import Sequence

from .spec import FactSpec, Rec, number

PORT_RANGE = "net.ipv4.ip_local_port_range"


def parse(records: Sequence[Rec]) -> dict[str, str]:
    return {r.fields[0]: r.fields[1].strip() for r in records if len(r.fields) >= 2}


def port_range(values: dict[str, str]) -> tuple[int, int] | None:
    """The ephemeral port range, e.g. (32768, 60999); None when unknown."""
    parts = values.get(PORT_RANGE, "").split()
    if len(parts) == 2 and all(number(p, 65535) is not None for p in parts):
        return int(parts[0]), int(parts[1])
    return None


SPEC = FactSpec("sysctl", ("sysctl",), parse)
