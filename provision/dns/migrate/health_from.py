"""Running a migration's health checks before the cutover: from this machine, or from a
bastion or host of the inventory (`--health-from HOST`), through its SSH connection (I/O).

A new value that only the private network reaches (a GPU host behind a bastion) cannot be
checked from the operator's machine: "Network is unreachable" after the TTL was waited
out. From HOST, its sshd makes each connection (`provision.ssh.dial`: a `direct-tcpip`
channel, no command on the host), over the same connection a converge uses: its jump
chain, its host keys checked as every connection's are (`provision.ssh.hostkeys`).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence

import paramiko

from provision.errors import OperationError, UsageError
from provision.inventory.model import Host, Inventory
from provision.ssh.connect import connect
from provision.ssh.dial import dial
from provision.text import printable

from . import health as H


def source(inv: Inventory, name: str | None, checks: Sequence[H.Check]) -> Host | None:
    """The host `--health-from NAME` names (None: this machine). UsageError (exit 2) for a
    name the inventory does not declare, or --health-from without any --health."""
    if name is None:
        return None
    if not checks:
        raise UsageError(f"--health-from {printable(name)}: there is no --health to run from "
                         "it (give --health tcp:PORT or --health URL)")
    nodes = {h.name: h for h in (*inv.bastions, *inv.hosts)}
    if name not in nodes:
        known = ", ".join(sorted(nodes)) or "none declared"
        raise UsageError(f"--health-from {printable(name)}: no host or bastion of that name in "
                         f"{inv.source} (hosts and bastions: {known})")
    return nodes[name]


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return mapped or ip


def refuse_local(via: Host, values: Sequence[str]) -> None:
    """UsageError (exit 2) for a value that would make the check land on `via` itself.

    From HOST, its sshd makes the connection: a loopback, unspecified or link-local value,
    or HOST's own address, is answered by HOST (where any account may listen on the port
    while the service is down, and its own firewall is never crossed), not by the machine
    the record will send clients to; link-local also reaches a cloud's metadata service."""
    own = {_ip(a) for a in (via.address, via.public_address or "") if a} - {None}
    own_names = {via.address.lower().rstrip(".")}
    for v in values:
        text = v.rstrip(".").lower()
        ip = _ip(text)
        why = ""
        if ip is not None:
            if ip.is_loopback or ip.is_unspecified or ip.is_link_local or ip.is_multicast:
                why = "a loopback, unspecified, link-local or multicast address"
            elif ip in own:
                why = f"{via.name}'s own address"
        elif text == "localhost" or text.endswith((".localhost", ".localdomain")):
            why = "a name of the local host"
        elif text in own_names:
            why = f"{via.name}'s own name"
        if why:
            raise UsageError(f"--health-from {via.name}: the new value {printable(v)} is {why}: "
                             f"the check would be answered by {via.name} itself, not by what the "
                             "record will point at (run the check from elsewhere, or without "
                             "--health-from)")


def run_checks(inv: Inventory, checks: Sequence[H.Check], values: Sequence[str],
               via: Host | None) -> list[H.Result]:
    """Every check against every value, from `via` (one connection for all) or here."""
    if via is None:
        return [H.run(c, v) for c in checks for v in values]
    try:
        chain = connect(inv, via)
    except (OSError, paramiko.SSHException, EOFError, OperationError) as e:
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise OperationError(f"--health-from {via.name}: cannot connect: {text}") from None
    try:
        transport = chain.conn.transport

        def through(host: str, port: int, timeout: float) -> socket.socket:
            return dial(transport, via.name, host, port, timeout)

        return [H.run(c, v, dial=through, where=via.name) for c in checks for v in values]
    finally:
        chain.close()


def gate(where: str, checks: Sequence[H.Check], values: Sequence[str],
         original: Sequence[str], say: Callable[[str], None], inv: Inventory,
         via: Host | None) -> None:
    """Say each result; OperationError (nothing switched) when any failed."""
    if not checks:
        say(f"{where}: no --health given: the new values were not checked")
        return
    if via is not None:
        refuse_local(via, values)
    results = run_checks(inv, checks, values, via)
    for r in results:
        say(f"{where}: health {r.check} {r.value}: {'ok' if r.ok else 'FAILED'} ({r.detail})")
    bad = [r for r in results if not r.ok]
    if bad:
        raise OperationError(f"{where}: health check failed "
                             f"({'; '.join(f'{r.check} {r.value}: {r.detail}' for r in bad)}); "
                             f"nothing switched, the record still holds "
                             f"{', '.join(original)} (phase lowered)")
