"""Fact: listening TCP sockets with their process (`ss -Htlnp`). Pure parser."""

from __future__ import annotations

from collections.abc import Sequence

from provision.frozen import frozen

from .spec import FactSpec, Rec, number


@frozen
class Socket:
    address: str
    port: int
    process: str


def parse_ss_line(line: str) -> Socket | None:
    """`LISTEN 0 4096 127.0.0.1:8888 0.0.0.0:* users:(("python3",pid=12,fd=3))`"""
    parts = line.split()
    if len(parts) < 4:
        return None
    addr, _, port = parts[3].rpartition(":")
    if number(port, 65535) is None:
        return None
    addr = addr.strip("[]").split("%", 1)[0]
    proc = ""
    for p in parts[5:]:
        if p.startswith('users:(("'):
            proc = p[len('users:(("'):].split('"', 1)[0]
    return Socket(addr, int(port), proc)


def parse(records: Sequence[Rec]) -> tuple[Socket, ...]:
    return tuple(s for s in (parse_ss_line(r.raw) for r in records) if s is not None)


SPEC = FactSpec("sockets", ("listen",), parse)
