"""Tests moved from tests/unit/test_exec_plan.py that run a real process (tests/unit stays pure)."""

from __future__ import annotations

import subprocess

from provision.ssh.exec_plan import (
    remote_command,
    split_pgid,
)


def test_the_sudo_line_runs_the_same_command_in_a_real_shell() -> None:
    line = remote_command("printf '%s\\n' \"$0\" x; exit 3", sudo=True).replace("sudo -n -- ", "")
    r = subprocess.run(["sh", "-c", line], capture_output=True, text=True)
    pid, rest = split_pgid(r.stdout.encode())
    assert pid is not None and rest == b"sh\nx\n" and r.returncode == 3
