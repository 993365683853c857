"""Fact: listening TCP and UDP sockets with their process (`ss -tlnpH`, `ss -ulnpH`). Pure parser.

`ss` spells addresses `0.0.0.0:22`, `[::]:22`, `*:22` (an IPv6 socket that also takes IPv4),
`127.0.0.53%lo:53` or `[fe80::1]%eth0:546`; the interface suffix is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from provision.frozen import frozen

from .spec import FactSpec, Rec, number


@frozen
class Listener:
    proto: str  # tcp | udp
    address: str  # 0.0.0.0, ::, * (both families), 127.0.0.1, ...
    port: int
    process: str = ""  # the first process holding the socket ("" when ss cannot say)
    pid: int | None = None

    @property
    def families(self) -> tuple[int, ...]:
        if self.address == "*":
            return (4, 6)
        return (6,) if ":" in self.address else (4,)

    @property
    def is_wildcard(self) -> bool:
        return self.address in ("*", "0.0.0.0", "::")

    @property
    def is_loopback(self) -> bool:
        return self.address == "::1" or self.address.startswith("127.")

    @property
    def endpoint(self) -> str:
        return f"[{self.address}]:{self.port}" if ":" in self.address else f"{self.address}:{self.port}"


def split_endpoint(text: str) -> tuple[str, int] | None:
    """`[::1]:8888` -> ('::1', 8888); None when it is not address:port."""
    addr, _, port = text.rpartition(":")
    if number(port, 65535) is None or not addr:
        return None
    addr = addr.split("%", 1)[0].strip("[]")
    return addr, int(port)


def process_of(parts: Sequence[str]) -> tuple[str, int | None]:
    """The first `users:(("name",pid=N,fd=M),...)` entry of an ss line."""
    for p in parts:
        if p.startswith('users:(("'):
            name = p[len('users:(("'):].split('"', 1)[0]
            pid = p.split("pid=", 1)[1].split(",", 1)[0] if "pid=" in p else ""
            return name, number(pid)
    return "", None


def parse_ss_line(proto: str, line: str) -> Listener | None:
    """`LISTEN 0 4096 127.0.0.1:8888 0.0.0.0:* users:(("python3",pid=12,fd=3))`"""
    parts = line.split()
    if len(parts) < 5:
        return None
    ep = split_endpoint(parts[3])
    if ep is None:
        return None
    name, pid = process_of(parts[5:])
    return Listener(proto, ep[0], ep[1], name, pid)


def parse(records: Sequence[Rec]) -> tuple[Listener, ...]:
    out = []
    for r in records:
        s = parse_ss_line("tcp" if r.kind == "ltcp" else "udp", r.raw)
        if s is not None and s not in out:
            out.append(s)
    return tuple(out)


SPEC = FactSpec("listeners", ("ltcp", "ludp"), parse)
