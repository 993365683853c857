"""`provision exec`'s stop (Ctrl-C, --timeout), end to end against the loopback paramiko
SSH server of tests/integration/test_ssh_auth.py, whose sessions here run real processes
on this machine, each in a session of its own as sshd starts them (`sh -c COMMAND` under
setsid), after a banner a hostile host prints first (a login shell's rc file, a
ForceCommand): the process group `exec` stops comes from provision's own marker, checked on
the host, never from a line the host prints; and the recap says what really happened.

Safety: a stop command is only ever run by this server when every process group it names
is one the server (or the test) started; any other (`kill -TERM -- -1`: every process of
this user) is recorded and refused, never run. So the code from before, which took the
host's `1` as the group, is shown wrong here without harm.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paramiko
import pytest
from click.testing import CliRunner

from provision.cli import main
from provision.ssh import exec_run
from tests.integration.test_ssh_auth import Recorder, Server, _inventory, _known

FAKE_SUDO = '#!/bin/sh\n[ "$1" = -n ] && shift\n[ "$1" = -- ] && shift\nexec "$@"\n'


class Host(Recorder):
    """Runs each exec request as sshd does: `sh -c` (here through `banner`, which may print
    before it and may replace the command) in a new session, output relayed, the exit
    status sent as the command exits (before its output closes, as sshd does)."""

    def __init__(self, accept: bytes, fakebin: Path,
                 banner: Callable[[str], str] = lambda command: "") -> None:
        super().__init__(accept)
        self.fakebin = fakebin
        self.banner = banner
        self.commands: list[str] = []
        self.procs: list[subprocess.Popen[bytes]] = []
        self.allowed: set[int] = set()  # process groups a stop may name (ours)
        self.refused: list[str] = []  # stop commands never run: they named another group

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        line = command.decode()
        self.commands.append(line)
        if "kill" in line:
            targets = _targets(line)
            if not targets or not targets <= self.allowed:
                self.refused.append(line)
                threading.Thread(target=_answer, args=(channel, b"test host: refused\n", 1),
                                 daemon=True).start()
                return True
        env = {"PATH": f"{self.fakebin}:{os.environ['PATH']}", "SHELL": "/bin/sh",
               "HOME": str(self.fakebin), "LC_ALL": "C", "SSH_ORIGINAL_COMMAND": line,
               "BANNER": self.banner(line)}
        wrapper = 'printf %s "$BANNER"; exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"'
        proc = subprocess.Popen(["sh", "-c", wrapper], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                start_new_session=True)
        self.procs.append(proc)
        self.allowed.add(proc.pid)
        threading.Thread(target=_relay, args=(channel, proc), daemon=True).start()
        return True

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                with _suppress():
                    os.killpg(p.pid, signal.SIGKILL)  # a group this server started
                p.wait()


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], ProcessLookupError)  # type: ignore[arg-type]


def _targets(line: str) -> set[int]:
    """The process groups a stop command names: `provision-stop PGID`, `kill ... -- -PGID`."""
    words = shlex.split(line)
    if "provision-stop" in words:
        return {int(words[words.index("provision-stop") + 1])}
    if "--" in words:
        return {-int(w) for w in words[words.index("--") + 1:] if re.fullmatch(r"-\d+", w)}
    return set()


def _answer(channel: paramiko.Channel, err: bytes, status: int) -> None:
    channel.sendall_stderr(err)
    channel.send_exit_status(status)
    channel.shutdown_write()
    channel.close()


def _relay(channel: paramiko.Channel, proc: subprocess.Popen[bytes]) -> None:
    def pump(stream: Any, send: Callable[[bytes], None]) -> None:
        while data := os.read(stream.fileno(), 65536):
            try:
                send(data)
            except (OSError, EOFError):
                return

    out = threading.Thread(target=pump, args=(proc.stdout, channel.sendall), daemon=True)
    err = threading.Thread(target=pump, args=(proc.stderr, channel.sendall_stderr), daemon=True)
    out.start()
    err.start()
    status = proc.wait()
    with _suppress_channel():
        if status >= 0:
            channel.send_exit_status(status)
    out.join()
    err.join()
    with _suppress_channel():
        channel.shutdown_write()
        channel.close()


class _suppress_channel:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], (OSError, EOFError))  # type: ignore[arg-type]


@pytest.fixture()
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Any]]:
    """host(banner) -> (Host, inventory path): a loopback host printing `banner` first."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    key = paramiko.RSAKey.generate(1024)
    identity = tmp_path / "id_test"
    key.write_private_key_file(str(identity))
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    (fakebin / "sudo").write_text(FAKE_SUDO)
    (fakebin / "sudo").chmod(0o755)
    started: list[tuple[Server, Host]] = []

    def make(banner: Callable[[str], str] = lambda command: "") -> tuple[Host, Path]:
        recorder = Host(key.asbytes(), fakebin, banner)
        server = Server(accept=key.asbytes(), recorder=recorder)
        started.append((server, recorder))
        _inventory(tmp_path, server.port, str(identity), _known(server))
        return recorder, tmp_path / "inventory.yml"

    yield make
    for server, recorder in started:
        server.close()
        recorder.close()


def _exec(inventory: Path, *args: str) -> tuple[int, dict[str, Any]]:
    r = CliRunner().invoke(main, ["exec", "-i", str(inventory), "gpu", "--json", *args])
    return r.exit_code, json.loads(r.stdout)


def _group_gone(pgid: int, within: float = 5.0) -> bool:
    """No live process (zombies aside) is left in process group `pgid`."""
    def alive() -> bool:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(") ", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z" and fields[2] == str(pgid):
                return True
        return False

    deadline = time.monotonic() + within
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive()


# --- a host that prints before the command: its lines are output, never the target --------

@pytest.mark.parametrize("banner", ["1\n", "0\n", "123\n", "Welcome to gpu\n", "no newline: "],
                         ids=["1", "0", "123", "a line", "no newline"])
@pytest.mark.parametrize("sudo", [False, True], ids=["login user", "sudo"])
def test_a_line_the_host_prints_first_is_output_and_the_runs_own_group_is_stopped(
        host: Callable[..., Any], banner: str, sudo: bool) -> None:
    """Before: the first line was the group: `1` made exec run `kill -TERM -- -1` (under
    sudo, every process on the host), and any other text turned the stop off while the
    recap said `timeout`/`timed out`. Now the host's line is kept as output, the group
    comes from this run's marker, and the command is gone from the host."""
    server, inventory = host(lambda command: banner)
    code, data = _exec(inventory, "--timeout", "1", *(["--sudo"] if sudo else []), "--",
                       "echo started; sleep 30; echo late")
    (h,) = data["hosts"]
    assert server.refused == [], server.refused  # no stop named a group not this run's
    proc = server.procs[0]  # the command (the stop ran as the second)
    assert _group_gone(proc.pid), "the command is still running on the host"
    assert h["stdout"] == banner + "started\n" and h["error"] == "timed out: stopped", h
    assert code == 1 and h["status"] == "timeout" and h["stop"] == "stopped", h
    (stop,) = [c for c in server.commands if "kill" in c]
    assert f"provision-stop {proc.pid} " in stop and stop.startswith("sudo -n ") == sudo


def test_the_text_recap_says_stopped(host: Callable[..., Any]) -> None:
    server, inventory = host(lambda command: "1\n")
    r = CliRunner().invoke(main, ["exec", "-i", str(inventory), "gpu", "--timeout", "1", "--",
                                  "sleep 30"])
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert lines[0].startswith("── gpu (timeout, exit -, ") and lines[1] == "1", r.stdout
    assert "timed out: stopped" in r.stdout, r.stdout
    assert server.refused == []


# --- a host that never runs the command as given: not stopped, and said so ----------------

def test_a_host_that_ignores_the_command_is_reported_not_stopped(
        host: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A ForceCommand that runs its own program: no marker ever comes. Before: the recap
    said `timeout`, `timed out`, as if stopped; the program went on running."""
    server, inventory = host(lambda command: "")
    server.banner = lambda command: ""
    forced = 'echo forced; exec sleep 30'
    server_exec = server.check_channel_exec_request

    def force(channel: paramiko.Channel, command: bytes) -> bool:
        return server_exec(channel, command if b"kill" in command else forced.encode())

    server.check_channel_exec_request = force  # type: ignore[method-assign]
    monkeypatch.setattr(exec_run, "KILL_TIMEOUT", 1.0)  # the wait for a marker that never comes
    code, data = _exec(inventory, "--timeout", "1", "--", "sleep 30")
    (h,) = data["hosts"]
    assert h["error"].startswith("timed out: not stopped: the host never printed this run's "
                                 "process-group marker"), h
    assert h["error"].endswith("it may still be running on the host"), h
    assert code == 1 and h["status"] == "timeout" and h["stop"] == "not stopped", h
    assert h["stdout"] == "forced\n"
    assert not [c for c in server.commands if "kill" in c]  # nothing to aim a stop at


def test_a_forged_marker_naming_another_group_is_refused_on_the_host(
        host: Callable[..., Any]) -> None:
    """The host knows the nonce (it is in the command line) and forges the marker with the
    group of another process of the same user: the host-side check finds that group's
    leader without the run's mark and signals nothing."""
    victim = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        def forge(command: str) -> str:
            m = re.search(r"provision-exec-([0-9a-f]+)", command)
            return f"provision-exec-{m.group(1)} {victim.pid}\n" if m else ""

        server, inventory = host(forge)
        server.allowed.add(victim.pid)  # so this server runs the stop (the check is the host's)
        code, data = _exec(inventory, "--timeout", "1", "--", "sleep 30")
        (h,) = data["hosts"]
        assert code == 1 and h["stop"] == "not stopped", h
        assert h["error"] == (f"timed out: not stopped: the host refused: process group "
                              f"{victim.pid} is not this run's (its leader lacks the run's "
                              "mark); it may still be running on the host"), h
        assert victim.poll() is None, "the host's check let another group be signalled"
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.parametrize("pgid", ["0", "1"])
def test_a_forged_marker_naming_group_0_or_1_is_never_sent(host: Callable[..., Any],
                                                           pgid: str) -> None:
    def forge(command: str) -> str:
        m = re.search(r"provision-exec-([0-9a-f]+)", command)
        return f"provision-exec-{m.group(1)} {pgid}\n" if m else ""

    server, inventory = host(forge)
    code, data = _exec(inventory, "--timeout", "1", "--", "sleep 30")
    (h,) = data["hosts"]
    assert code == 1 and h["stop"] == "not stopped" and h["error"] == (
        f"timed out: not stopped: the host named process group {pgid}, which is never "
        "signalled; it may still be running on the host"), h
    assert not [c for c in server.commands if "kill" in c]


# --- a command that ended on its own is not "timeout" --------------------------------------

def test_a_command_that_exited_but_left_its_output_open_is_not_a_timeout(
        host: Callable[..., Any]) -> None:
    """The command exits 0 at once, leaving a process that holds its stdout: the exit status
    comes, the output stays open past the timeout. Before: `timeout`, `timed out`, exit
    `-`, for a command that ended by itself. Now: `ok`, exit 0, and the note says what was
    done with what it left."""
    server, inventory = host()
    code, data = _exec(inventory, "--timeout", "1", "--", "echo hi; sleep 30 & exit 0")
    (h,) = data["hosts"]
    assert code == 0 and h["status"] == "ok" and h["exit_status"] == 0, h
    assert h["error"] == (
        "timed out, but it had ended on its own; what it left running was stopped"), h
    assert h["stop"] == "ended"
    assert h["stdout"] == "hi\n" and server.refused == []
    assert _group_gone(server.procs[0].pid), "what it left is still running"


def test_a_stop_whose_channel_closes_before_its_exec_reply_still_counts(
        host: Callable[..., Any]) -> None:
    """The stop command can run and its channel close before exec's reply reaches us (seen
    on a loaded machine: "could not stop the remote command: Channel closed."). Here the
    host always answers that way round: its status and stderr are the answer."""
    server, inventory = host(lambda command: "")
    server_exec = server.check_channel_exec_request

    def close_first(channel: paramiko.Channel, command: bytes) -> bool:
        ok = server_exec(channel, command)
        if b"kill" in command:  # the reply goes out once this returns: after the close
            deadline = time.monotonic() + 10
            while not channel.closed and time.monotonic() < deadline:
                time.sleep(0.01)
        return ok

    server.check_channel_exec_request = close_first  # type: ignore[method-assign]
    code, data = _exec(inventory, "--timeout", "1", "--", "sleep 30")
    (h,) = data["hosts"]
    assert code == 1 and h["error"] == "timed out: stopped" and h["stop"] == "stopped", h
    assert _group_gone(server.procs[0].pid)
