"""Tests moved from tests/unit/test_exec_plan.py that run a real process (tests/unit stays pure):
the remote command line and the stop script (`STOP_SCRIPT`) in a real sh, against real
process groups of this machine. The cases that must never reach `kill` (groups 0, 1, the
stop's own) run with a stand-in `kill` function that only says what it was asked."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from provision.ssh.exec_plan import remote_command, stop_command


def _gone(proc: subprocess.Popen[bytes], within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc.poll() is not None


def test_the_sudo_line_runs_the_same_command_in_a_real_shell(tmp_path: Path) -> None:
    """Under a stand-in sudo that runs its command as is: the marker (the session's pid),
    then the command's own output, its exit status."""
    (tmp_path / "sudo").write_text('#!/bin/sh\n[ "$1" = -n ] && shift\n[ "$1" = -- ] && shift\n'
                                   'exec "$@"\n')
    (tmp_path / "sudo").chmod(0o755)
    nonce = "ab" * 16
    line = remote_command("printf '%s\\n' \"$0\" x; exit 3", sudo=True, nonce=nonce)
    r = subprocess.run(["sh", "-c", line], capture_output=True, text=True,
                       env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    mark, rest = r.stdout.split("\n", 1)
    assert re.fullmatch(rf"provision-exec-{nonce} \d+", mark) and rest == "sh\nx\n", r.stdout
    assert r.returncode == 3


def _session(command: str, sudo: bool = False) -> tuple[subprocess.Popen[bytes], str, int]:
    """`command` started as exec starts it (marker, then `exec env ...`), in a session of
    its own: (process, nonce, pgid from the marker)."""
    nonce = os.urandom(16).hex()
    line = remote_command(command, sudo, nonce)
    proc = subprocess.Popen(["sh", "-c", line], stdout=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, "SHELL": "/bin/sh"})
    assert proc.stdout is not None
    mark = proc.stdout.readline().decode()
    assert re.fullmatch(rf"provision-exec-{nonce} (\d+)\n", mark), mark
    return proc, nonce, int(mark.split()[1])


def _stop(pgid: int, nonce: str, shadow_kill: bool = False) -> subprocess.CompletedProcess[str]:
    line = stop_command(pgid, nonce, sudo=False)
    if shadow_kill:  # for the cases that must never reach kill: a stand-in that only says so
        line = line.replace("sh -c '", "sh -c 'kill() { echo \"KILL $*\" >&2; return 0; }; ", 1)
    return subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=30)


def test_the_stop_script_signals_this_runs_group_only() -> None:
    proc, nonce, pgid = _session("sleep 30 & sleep 31")
    try:
        assert pgid == proc.pid  # the session shell's pid: the group's leader
        environ = Path(f"/proc/{pgid}/environ").read_bytes().split(b"\0")
        assert f"PROVISION_EXEC={nonce}".encode() in environ
        other = _stop(pgid, "0" * 32)  # another run's nonce
        assert other.returncode == 3 and "is not this run's" in other.stderr
        assert proc.poll() is None
        r = _stop(pgid, nonce)
        assert r.returncode == 0, r.stderr
        assert _gone(proc)
        gone = _stop(pgid, nonce)
        assert gone.returncode == 4, gone.stderr  # no such group any more: it ended
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_the_stop_script_finds_the_group_once_its_leader_is_gone() -> None:
    """The leader exited, its child (which inherited the mark) still runs in the group."""
    proc, nonce, pgid = _session("sleep 30 >/dev/null 2>&1 & echo $! ; exit 0")
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    proc.wait()
    try:
        assert Path(f"/proc/{child}").exists()
        r = _stop(pgid, nonce)
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 5
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(child)
    finally:
        if _running(child):
            os.kill(child, signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


@pytest.mark.parametrize("pgid", [0, 1])
def test_the_stop_script_never_signals_group_0_or_1(pgid: int) -> None:
    r = _stop(pgid, "0" * 32, shadow_kill=True)
    assert r.returncode == 3 and "KILL" not in r.stderr, r.stderr
    assert f"process group '{pgid}' is never signalled" in r.stderr


def test_the_stop_script_never_signals_its_own_group() -> None:
    """A group naming the stop command's own session (its login shell's pid)."""
    line = stop_command(999999, "0" * 32, sudo=False).replace(
        "sh -c '", "sh -c 'kill() { echo \"KILL $*\" >&2; return 0; }; ", 1)
    # the stop's shell learns its own group from /proc/self: name it through $PPID's group
    line = line.replace(" provision-stop 999999 ", " provision-stop \"$$\" ")
    r = subprocess.run(["setsid", "sh", "-c", line], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 3 and "KILL" not in r.stderr, r.stderr
    assert "is the stop command's own" in r.stderr


def test_the_stop_scan_forks_nothing_per_process(tmp_path: Path) -> None:
    """The scan for a group's members reads every process of the host. It used to run `cat`
    once per process: seconds on a busy host, past the wait for the stop's answer (a CI run
    reported "no answer from the host to the stop command"). Now no command runs per
    process: with every external tool the script may use replaced by a recorder, a scan for
    a group that has no member (exit 4) calls none of them."""
    calls = tmp_path / "calls"
    for tool in ("cat", "tr", "grep", "kill"):
        (tmp_path / tool).write_text(f'#!/bin/sh\necho {tool} >>"{calls}"\nexit 1\n')
        (tmp_path / tool).chmod(0o755)
    line = stop_command(2 ** 22 + 12345, "ab" * 16, sudo=False)  # above pid_max: no member
    r = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert r.returncode == 4, r.stderr
    assert not calls.exists(), calls.read_text()


def test_an_environ_read_empty_mid_exec_is_read_again(tmp_path: Path) -> None:
    """A process in the middle of an exec reads as an empty environ for a moment (a loaded
    CI machine hit it: "process group N is not this run's (no member has the run's mark)"
    for the run's own group). A `tr` that gives nothing on its first two reads stands in for
    that moment: the stop reads again and signals the group."""
    real = subprocess.run(["sh", "-c", "command -v tr"], capture_output=True, text=True).stdout.strip()
    count = tmp_path / "reads"
    (tmp_path / "tr").write_text(
        f'#!/bin/sh\necho x >>"{count}"\n'
        f'[ "$(wc -l <"{count}")" -le 2 ] && {{ cat >/dev/null; exit 0; }}\nexec {real} "$@"\n')
    (tmp_path / "tr").chmod(0o755)
    proc, nonce, pgid = _session("sleep 30")
    try:
        line = stop_command(pgid, nonce, sudo=False)
        r = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=30,
                           env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
        assert r.returncode == 0, r.stderr
        assert _gone(proc)
        assert len(count.read_text().split()) == 3  # two empty reads, then the environ
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
