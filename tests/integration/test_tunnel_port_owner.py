"""A member's port is known to everyone (a function of their name), so another account may
listen on it while their server is down (a restart, a reboot). The tunnel must not hand
that listener the member's token: the probe, run for real here, says who holds the port,
and the token is given only when nobody but the member does."""

from __future__ import annotations

import dataclasses
import os
import pwd
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from provision.inventory import load_inventory
from provision.inventory.catalog import MEMBER_TOKEN_FILE
from provision.inventory.model import Service
from provision.tunnel.tokens import (
    PROBE_BEGIN,
    parse_probe,
    port_holders,
    port_owners_command,
    probe_command,
    service_state,
)

INV = Path(__file__).parent.parent / "fixtures" / "member_servers" / "inventory.yml"
TOKEN = "0123abcd" * 8
# the OS's interpreter: another account cannot run the test's (under root's home)
LISTENER_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
LISTEN = ("import socket, sys; s = socket.create_server(('127.0.0.1', int(sys.argv[1]))); "
          "print('ready', flush=True); sys.stdin.read()")


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return int(s.getsockname()[1])


@pytest.fixture
def bob(tmp_path: Path) -> Service:
    svc = next(s for s in load_inventory(INV).node("gpu1").services if s.member == "bob")
    token = tmp_path / MEMBER_TOKEN_FILE.removeprefix("~/")
    token.parent.mkdir(parents=True)
    token.write_text(TOKEN)
    # on a loopback port (per_user_socket: false), run by this test's own account (the one
    # the probe's `id -u` names here; bob has no account on this machine)
    return dataclasses.replace(svc, port=_free_port(), socket=None,
                               user=pwd.getpwuid(os.getuid()).pw_name)


@contextmanager
def _listener(port: int, uid: int | None) -> Iterator[subprocess.Popen[str]]:
    p = subprocess.Popen([LISTENER_PYTHON, "-c", LISTEN, str(port)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, user=uid)
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        yield p
    finally:
        p.kill()
        p.wait()


def _state(svc: Service, home: Path, listening: bool = True) -> tuple[str | None, str]:
    cmd = probe_command([svc], "bob", check_listening=True)
    # the probe is `bash -c QUOTED`: run the same way the host's login shell would
    out = subprocess.run(cmd, shell=True, env={**os.environ, "HOME": str(home)},
                         capture_output=True, text=True, check=True, timeout=30)
    st = service_state(svc, parse_probe(out.stdout).get(svc.name, {}), "bob")
    assert st.listening is listening
    return st.token, st.note


@pytest.mark.skipif(os.geteuid() != 0, reason="listening as another account needs root")
def test_the_token_goes_to_no_port_another_account_holds(bob: Service, tmp_path: Path) -> None:
    with _listener(bob.port, 65534):
        token, note = _state(bob, tmp_path)
        assert token is None
        assert f"port {bob.port} on the host is held by uid 65534, not bob" in note
    with _listener(bob.port, None):
        assert _state(bob, tmp_path) == (TOKEN, "")
    # nobody listening: the port is anybody's to take, so no token either
    token, note = _state(bob, tmp_path, listening=False)
    assert token is None and "bob's server does not listen on port" in note


def test_a_host_without_ipv6_still_says_who_listens(tmp_path: Path) -> None:
    # no /proc/net/tcp6 with ipv6.disable=1; Debian's awk (mawk) stops at a file it cannot open
    cmd = (f"{port_owners_command(80, None, ('/proc/net/tcp', str(tmp_path / 'tcp6')))}; "
           f"echo {PROBE_BEGIN} next listen; echo yes")
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=30)
    sections = parse_probe(f"{PROBE_BEGIN} svc owners\n{out.stdout}")
    assert sections["next"] == {"listen": "yes\n"}
    assert port_holders(sections["svc"]["owners"]) is not None
