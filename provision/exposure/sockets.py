"""TCP sockets' findings (pure): CLOSE_WAIT piles, TIME_WAIT eating the ephemeral range."""

from __future__ import annotations

from provision.facts import tcpstates as TS
from provision.finding import Finding
from provision.inventory.model import Host

CLOSE_WAIT_PILE = 100  # CLOSE_WAIT sockets held by one process
TIME_WAIT_SHARE = 0.25  # of the ephemeral port range


def socket_findings(host: Host, states: TS.TcpStates, port_range: tuple[int, int] | None) -> list[Finding]:
    out = []
    for (proc, pid), n in sorted(states.close_wait.items(), key=lambda kv: -kv[1]):
        if n >= CLOSE_WAIT_PILE:
            who = f"{proc} (pid {pid})" if proc else "sockets no process holds"
            out.append(Finding(
                "warning", "close-wait-pile", f"{host.name}/{proc or '?'}",
                f"{who} holds {n} TCP sockets in CLOSE_WAIT: the peers closed their side and the "
                "application never called close(); each one keeps a file descriptor and memory "
                "until the process exits",
                f"fix the leak in {proc or 'the application'} (close sockets on EOF, use timeouts); "
                "restarting it frees them for now"))
    tw = states.count("TIME-WAIT")
    if port_range and tw:
        size = port_range[1] - port_range[0] + 1
        if tw >= TIME_WAIT_SHARE * size:
            out.append(Finding(
                "warning", "time-wait-share", host.name,
                f"{tw} sockets in TIME_WAIT = {tw / size:.0%} of the ephemeral port range "
                f"{port_range[0]}-{port_range[1]}: this host opens short connections faster than "
                "the kernel retires them, and new outgoing connections will fail to find a port",
                "reuse connections (HTTP keep-alive, pools), or widen net.ipv4.ip_local_port_range"))
    return out
