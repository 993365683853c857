"""The Fabric API (`provision.fleet`) shows a host's output escaped: against the loopback
paramiko SSH server of tests/integration/test_ssh_auth.py, a host that answers every command
with terminal escape sequences (ESC, a CSI erase, an OSC 52 clipboard write, a bidi override,
a lone CR) on stdout and stderr. The bytes that reach this process's stdout and stderr (its
file descriptors, as a terminal would get them) are checked; the documented example of
docs/fleet-api.md is run as written."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import fabric
import paramiko
import pytest
from invoke.exceptions import UnexpectedExit

from provision import fleet
from provision.ssh.fabric_link import EscapedOutput
from provision.text import printable
from tests.integration.test_ssh_auth import Recorder, Server, _known
from tests.unit.test_output_escaping import ESCAPED, HOSTILE, LITERAL, assert_clean

DOC = Path(__file__).resolve().parents[2] / "docs" / "fleet-api.md"
# every kind of attack on a terminal (tests/unit/test_output_escaping.py), then a pty's CR LF
HOSTILE_OUT = f"gpu0: {HOSTILE}\r\nnext\n"
HOSTILE_ERR = "warn\x1b[31m red\x9b1m\n"
SHOWN = f"gpu0: {ESCAPED}\nnext\n"  # what the terminal must get instead


class Hostile(Recorder):
    """Every command answered with HOSTILE_OUT and HOSTILE_ERR; `false...` exits 1."""

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        def answer() -> None:
            channel.sendall(HOSTILE_OUT.encode())
            channel.sendall_stderr(HOSTILE_ERR.encode())
            channel.send_exit_status(1 if command.startswith(b"false") else 0)
            channel.shutdown_write()

        threading.Thread(target=answer, daemon=True).start()
        return True


@pytest.fixture()
def inventory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    key = paramiko.RSAKey.generate(1024)
    identity = tmp_path / "id_test"
    key.write_private_key_file(str(identity))
    server = Server(accept=key.asbytes(), recorder=Hostile(key.asbytes()))
    kh = tmp_path / "known_hosts"
    kh.write_text(_known(server))
    path = tmp_path / "inventory.yml"
    path.write_text(f"version: 1\ndefaults:\n  user: root\n  identity_file: {identity}\n"
                    f"  known_hosts: {kh}\nroles:\n  gpu-server: {{packages: [tmux]}}\nhosts:\n"
                    f"  gpu: {{address: 127.0.0.1, port: {server.port}, roles: [gpu-server]}}\n")
    try:
        yield path
    finally:
        server.close()


def assert_escaped(printed: bytes, times: int = 1) -> None:
    """No raw control, format or bidi character; the host's output shown escaped."""
    plain = assert_clean(printed, *LITERAL, SHOWN)
    assert plain.count(SHOWN) == times, plain


def test_run_echoes_host_output_escaped(inventory: Path, capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    """Before: Fabric's `run` wrote the host's bytes to the terminal as they came."""
    with fleet.Fleet(fleet.load(inventory)) as f:
        r = f.connection("gpu").run("nvidia-smi -L", in_stream=False)
    out, err = capfdbinary.readouterr()
    assert_escaped(out)
    assert_clean(err, "warn\\x1b[31m red\\x9b1m\n")
    assert r.stdout == HOSTILE_OUT  # the Result keeps the host's text as data


def test_a_group_and_sudo_echo_escaped(inventory: Path, capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    with fleet.Fleet(fleet.load(inventory)) as f:
        f.group(["all"]).run("uptime", in_stream=False)
        f.connection("gpu").sudo("id -un", in_stream=False)
    out, err = capfdbinary.readouterr()
    assert_escaped(out, times=2)
    assert_clean(err, "warn\\x1b[31m red\\x9b1m\n")


def test_the_callers_own_config_is_escaped_too(inventory: Path,
                                                capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    config = fabric.Config(overrides={"load_ssh_configs": False})
    with fleet.Fleet(fleet.load(inventory), config=config) as f:
        c = f.connection("gpu")
        c.run("uptime", in_stream=False)
        # `shell()` (an interactive session in a pty) echoes through the same escaping
        assert issubclass(c.config.runners.remote_shell, EscapedOutput)
        assert issubclass(c.config.runners.remote_shell, fabric.runners.RemoteShell)
    assert_escaped(capfdbinary.readouterr().out)
    assert config.runners.remote is fabric.runners.Remote  # the caller's config is untouched


def test_a_failures_message_shows_the_output_escaped(inventory: Path) -> None:
    """`fab` prints an UnexpectedExit of a hidden command, with the output's tail, and so
    does a traceback."""
    with fleet.Fleet(fleet.load(inventory)) as f, pytest.raises(UnexpectedExit) as e:
        f.connection("gpu").run("false", hide=True, in_stream=False)
    message = str(e.value)
    assert "Exit code: 1" in message
    # (invoke's tail cuts lines at a CR or U+2028 too: those become line breaks there)
    assert_clean(message.encode(), printable("\x1b]52;c;cm0gLXJmIH4K\x07"),
                 "warn\\x1b[31m red\\x9b1m")
    assert_clean(str(e.value.result).encode(), ESCAPED)
    assert e.value.result.stdout == HOSTILE_OUT


def test_raw_output_only_when_asked(inventory: Path, capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    inv = fleet.load(inventory)
    with fleet.Fleet(inv, raw_output=True) as f:
        f.connection("gpu").run("uptime", in_stream=False)
    assert HOSTILE_OUT.encode() in capfdbinary.readouterr().out  # as the host sent it
    c = fleet.connection_for(inv, inv.node("gpu"))
    try:
        c.run("uptime", in_stream=False)
    finally:
        c.close()
    assert_escaped(capfdbinary.readouterr().out)


def test_the_documented_example_is_safe_as_written(inventory: Path,
                                                   capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    """docs/fleet-api.md's Python example, run as written (the inventory's path aside).
    Before, it printed `r.stdout` as the host sent it."""
    (code,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert '"inventory.yml"' in code
    # its commands run with the terminal's stdin; under pytest there is none to read
    code = code.replace('"inventory.yml"', repr(str(inventory)))
    code = code.replace('.run("nvidia-smi -L")', '.run("nvidia-smi -L", in_stream=False)')
    code = code.replace("hide=True, warn=True)", "hide=True, warn=True, in_stream=False)")
    exec(compile(code, str(DOC), "exec"), {})
    out, err = capfdbinary.readouterr()
    plain = assert_clean(out, *LITERAL, SHOWN)  # the echo of `run`
    assert f"gpu {printable(HOSTILE_OUT.strip())}\n" in plain  # the printed r.stdout.strip()
    assert_clean(err)


def test_a_playbook_tasks_connection_escapes_too() -> None:
    """`provision.pytasks.fabric` names a runner of its own (counting execs): it is
    wrapped like Fabric's, so a task's `c.run(..., hide=False)` shows output escaped."""
    from provision.ssh.fabric_link import fabric_config

    class Counted(fabric.runners.Remote):
        pass

    config = fabric_config(run={"hide": True}, runners={"remote": Counted})
    assert issubclass(config.runners.remote, EscapedOutput)
    assert issubclass(config.runners.remote, Counted)
    assert issubclass(config.runners.remote_shell, EscapedOutput)
    raw = fabric_config(raw_output=True, runners={"remote": Counted})
    assert raw.runners.remote is Counted
