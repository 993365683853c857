"""Ctrl-C while a tunnel connects (or checks) ends it at once, leaving no process behind.

The "server" is a TCP listener on 127.0.0.1 that accepts and never sends an SSH banner,
so both backends hang in the handshake, as they do behind a dropped SYN or a stalled host.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

INVENTORY = """version: 1
defaults: {{user: admin, port: {port}, known_hosts: {kh}}}
hosts:
  gpu1:
    address: 127.0.0.1
    ssh_from: [127.0.0.1/32]
    services: {{jupyter: {{}}}}
"""


class Silent:
    """Accepts connections, never answers; records when each is closed by the peer."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = threading.Event()
        self.closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        self.accepted.set()
        conn.settimeout(30)
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass
        self.closed.set()


@pytest.mark.parametrize("backend", ["openssh", "paramiko"])
def test_ctrl_c_while_connecting_stops_at_once(tmp_path: Path, backend: str) -> None:
    if backend == "openssh" and shutil.which("ssh") is None:
        pytest.skip("no ssh binary on this machine (the openssh backend needs one)")
    server = Silent()
    inv = tmp_path / "inv.yml"
    inv.write_text(INVENTORY.format(port=server.port, kh=tmp_path / "known_hosts"))
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from provision.cli import main; sys.exit(main())",
         "tunnel", "-i", str(inv), "gpu1", "--backend", backend],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "USER": "nobody-here"})
    try:
        assert server.accepted.wait(20), "the tunnel never connected to the silent server"
        proc.send_signal(signal.SIGINT)
        # The connect timeout is 10-15 s; an interrupted tunnel is gone well before that.
        _, err = proc.communicate(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    assert "interrupted" in err and "Traceback" not in err
    # the connection the tunnel opened is closed: no ssh (or paramiko thread) left holding it
    assert server.closed.wait(5)
