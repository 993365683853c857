"""paramiko's waits survive a step of the wall clock (provision/ssh/paramiko_clock.py):
a real paramiko client and server on a socket pair; the server steps the client's wall
clock an hour forward while it answers a channel open."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import paramiko
import pytest

from provision.ssh import link  # noqa: F401  # installs the clock, as every connection does
from provision.ssh.paramiko_clock import CLOCK, MODULES, install

REAL_TIME = time.time


class Server(paramiko.ServerInterface):
    def __init__(self, stepped: threading.Event) -> None:
        self.stepped = stepped

    def get_allowed_auths(self, username: str) -> str:
        return "none"

    def check_auth_none(self, username: str) -> int:
        return paramiko.AUTH_SUCCESSFUL

    def check_channel_direct_tcpip_request(self, chanid: int, origin: tuple[str, int],
                                           destination: tuple[str, int]) -> int:
        self.stepped.set()  # the client's wall clock jumps now, while it waits for this answer
        time.sleep(0.3)  # its wait loop wakes every 0.1 s and reads the clock
        return paramiko.OPEN_SUCCEEDED


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[paramiko.Transport]:
    stepped = threading.Event()
    # the process's wall clock, as a step by NTP would move it
    monkeypatch.setattr(time, "time", lambda: REAL_TIME() + (3600 if stepped.is_set() else 0))
    a, b = socket.socketpair()
    server = paramiko.Transport(b)
    server.add_server_key(paramiko.RSAKey.generate(1024))
    server.start_server(event=threading.Event(), server=Server(stepped))  # returns at once
    t = paramiko.Transport(a)
    t.start_client(timeout=10)
    t.auth_none("member")
    yield t
    t.close()
    server.close()


def test_a_channel_opens_while_the_wall_clock_steps_an_hour(client: paramiko.Transport) -> None:
    chan = client.open_channel("direct-tcpip", ("10.0.0.1", 22), ("127.0.0.1", 0), timeout=2)
    assert chan is not None and time.time() - REAL_TIME() > 3599  # the step did happen
    chan.close()


def test_every_module_paramiko_times_waits_in_has_the_clock() -> None:
    install()  # idempotent
    import importlib
    for name in MODULES:
        assert importlib.import_module(name).time is CLOCK, name
    before = CLOCK.time()
    assert abs(before - REAL_TIME()) < 5 and CLOCK.time() >= before
    assert CLOCK.sleep is time.sleep and CLOCK.monotonic is time.monotonic
