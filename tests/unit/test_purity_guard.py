"""The guard that keeps tests/unit pure (tests/support/purity.py) refuses what it says."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tests.support.purity import ImpureTest


def test_a_subprocess_is_refused_with_where_to_go() -> None:
    with pytest.raises(ImpureTest, match="started a subprocess: move it to tests/integration"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
    with pytest.raises(ImpureTest, match=r"os\.system"):
        os.system("true")


def test_a_network_socket_is_refused() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        with pytest.raises(ImpureTest, match="connection"):
            s.connect(("127.0.0.1", 9))
        with pytest.raises(ImpureTest, match="bound a socket"):
            s.bind(("127.0.0.1", 0))
    with pytest.raises(ImpureTest, match="connection"):
        socket.create_connection(("127.0.0.1", 9), timeout=1)


def test_a_socket_pair_stays_allowed() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b"ping")
        assert b.recv(4) == b"ping"
