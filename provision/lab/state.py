"""The lab's state on this machine: its state file and lock, and its containers' processes
as /proc shows them (alive, really our systemd-nspawn, the container's PID 1)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import plan as P


def state_path(name: str) -> Path:
    return Path(P.STATE_ROOT) / name / "state.json"


def read_state(name: str) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(state_path(name).read_text())
        return data
    except FileNotFoundError:
        return None


def write_state(plan: P.LabPlan, pids: dict[str, int], status: str) -> None:
    p = state_path(plan.name)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(P.state_doc(plan, pids, status), indent=2))
    tmp.replace(p)


@contextmanager
def lab_lock(name: str) -> Iterator[None]:
    Path(P.STATE_ROOT).mkdir(parents=True, exist_ok=True)
    with open(lock_path(name), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def lock_path(name: str) -> str:
    return f"{P.STATE_ROOT}/.{name}.lock"


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def is_nspawn(pid: int, machine: str) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(cmd) and cmd[0].endswith(b"systemd-nspawn") and f"--machine={machine}".encode() in cmd


def container_leader(nspawn_pid: int) -> int | None:
    """The container's PID 1 (systemd) as seen from the machine."""
    try:
        for task in os.listdir(f"/proc/{nspawn_pid}/task"):
            kids = Path(f"/proc/{nspawn_pid}/task/{task}/children").read_text().split()
            if kids:
                return int(kids[0])
    except OSError:
        return None
    return None
