"""Restart one lab host as a power cycle would: the container shuts down (`systemctl
reboot` inside makes systemd-nspawn exit), the kernel state a real reboot loses is cleared
(netfilter rules live in the node's network namespace, which outlives the container), and
the container boots again from the same overlay. Shell layer; root.
"""

from __future__ import annotations

import subprocess
import time

from . import plan as P
from . import shell
from .state import container_leader, lab_lock, read_state, write_state

TABLES = ("filter", "nat", "mangle", "raw")
STOP_TIMEOUT = 30.0


def clear_netfilter(netns: str) -> None:
    """Every iptables/ip6tables table of the namespace back to empty and ACCEPT, as at boot."""
    for tool in ("iptables", "ip6tables"):
        for table in TABLES:
            for args in (["-F"], ["-X"]):
                subprocess.run(["ip", "netns", "exec", netns, tool, "-w", "-t", table, *args],
                               capture_output=True, check=False)
        for chain in ("INPUT", "FORWARD", "OUTPUT"):
            subprocess.run(["ip", "netns", "exec", netns, tool, "-w", "-P", chain, "ACCEPT"],
                           capture_output=True, check=False)


def restart_host(name: str, host: str) -> float:
    """Reboot container `host` of lab `name`; returns the seconds until sshd answered again."""
    with lab_lock(name):
        state = read_state(name)
        if state is None:
            raise shell.LabError(f"lab {name} is not up")
        plan = P.plan_from_state(state)
        node = plan.node(host)
        if not node.is_container:
            raise shell.LabError(f"{host} is not a container")
        pids: dict[str, int] = dict(state.get("pids", {}))
        pid = pids[host]
        t0 = time.monotonic()
        leader = container_leader(pid)
        if leader is not None:
            subprocess.run(["nsenter", "-t", str(leader), "-a", "--", "systemctl", "reboot"],
                           capture_output=True, check=False, timeout=30)
        if shell._wait_gone([pid], STOP_TIMEOUT):
            raise shell.LabError(f"{host}: systemd-nspawn did not exit after reboot")
        clear_netfilter(node.netns)
        root = shell.host_dir(plan, node) / "root"
        pids[host] = shell.start_container(plan, node, root)
        write_state(plan, pids, "up")
        shell.wait_ready(plan, node, pids[host], time.monotonic() + shell.BOOT_TIMEOUT)
        return time.monotonic() - t0
