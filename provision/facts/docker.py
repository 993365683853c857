"""Fact: ports that Docker publishes (`docker ps --format '{{.Names}}|{{.Ports}}'`). Pure parser.

`0.0.0.0:8080->80/tcp, :::8080->80/tcp, 127.0.0.1:9000-9001->9000-9001/tcp, 5432/tcp`: only
the entries with `->` are published; a host range gives one entry per port.
"""

from __future__ import annotations

from collections.abc import Sequence

from provision.frozen import frozen

from .spec import FactSpec, Rec, number


@frozen
class Published:
    container: str
    address: str  # host address: 0.0.0.0, ::, 127.0.0.1, ...
    port: int  # host port
    proto: str  # tcp | udp
    target: str  # container port/proto as docker prints it

    @property
    def is_loopback(self) -> bool:
        return self.address == "::1" or self.address.startswith("127.")


def parse_ports(container: str, text: str) -> list[Published]:
    out: list[Published] = []
    for entry in (e.strip() for e in text.split(",")):
        if "->" not in entry:
            continue
        host, _, target = entry.partition("->")
        addr, _, ports = host.rpartition(":")
        addr = addr.strip("[]") or "0.0.0.0"
        proto = target.rpartition("/")[2] or "tcp"
        lo_text, _, hi_text = ports.partition("-")
        lo, hi = number(lo_text, 65535), number(hi_text or lo_text, 65535)
        if lo is None or hi is None or hi < lo:  # not a port range: nothing Docker publishes
            continue
        for port in range(lo, hi + 1):
            out.append(Published(container, addr, port, proto, target))
    return out


def parse(records: Sequence[Rec]) -> tuple[Published, ...]:
    out: list[Published] = []
    for r in records:
        name, _, ports = r.raw.partition("|")
        out += parse_ports(name, ports)
    return tuple(out)


SPEC = FactSpec("docker", ("dockerps",), parse)
