"""What `plan`, `apply` and `audit` say when no host answers, and how their output is laid
out: the CLI as a process, its hosts on a loopback port nothing listens on (issue 39).

- the last line says nothing could be done and why, and the exit status is 1;
- to a pipe (a log, `| grep`) no line is ever broken, however long;
- to a terminal, lines wrap at the terminal's width.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import socket
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
import yaml

# long names: the recap's rows are far wider than 120 columns (the old width for a pipe)
NAMES = [f"gpu{i}-{'x' * 55}" for i in (1, 2, 3)]
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


@pytest.fixture
def inventory(tmp_path: Path) -> tuple[Path, int]:
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    doc = {"version": 1,
           "defaults": {"user": "admin", "known_hosts": str(tmp_path / "known_hosts")},
           "hosts": {n: {"address": "127.0.0.1", "port": port, "ssh_from": ["10.0.0.0/8"]}
                     for n in NAMES}}
    path = tmp_path / "inv.yml"
    path.write_text(yaml.safe_dump(doc))
    return path, port


def provision(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "provision", *args], capture_output=True,
                          text=True, env={**ENV, "HOME": str(cwd)}, cwd=cwd, timeout=120)


def test_plan_with_every_host_unreachable(inventory: tuple[Path, int], tmp_path: Path) -> None:
    inv, port = inventory
    r = provision("plan", "-i", str(inv), cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Nothing could be planned: 3 hosts unreachable." in r.stdout.splitlines()
    assert "No changes" not in r.stdout
    # each host's recap row is one line, its reason whole (it used to fold at 120 columns,
    # `127.0.0.1` cut from `port N on`)
    for name in NAMES:
        rows = [line for line in r.stdout.splitlines() if name in line]
        assert rows and all(f"port {port} on 127.0.0.1" in row for row in rows), r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) > 160  # really wider than 120


def test_apply_and_audit_with_every_host_unreachable(inventory: tuple[Path, int],
                                                      tmp_path: Path) -> None:
    inv, _ = inventory
    r = provision("apply", "--yes", "-i", str(inv), cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines()[-1] == "Nothing could be applied: 3 hosts unreachable."
    r = provision("audit", "-i", str(inv), cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    last = r.stdout.splitlines()[-1]
    assert last.startswith("nothing could be audited: 3 hosts unreachable ("), r.stdout
    assert "audited 3 hosts" not in r.stdout


def _read_all(fd: int) -> bytes:
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 60)
        if not ready:
            return out
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other side is closed
            return out
        if not chunk:
            return out
        out += chunk


def test_a_terminal_wraps_at_its_own_width(inventory: tuple[Path, int], tmp_path: Path) -> None:
    """On a terminal 70 columns wide, no line is wider than 70 and the recap's rows wrap."""
    inv, port = inventory
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 70, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "provision", "plan", "-i", str(inv)],
                            stdin=slave, stdout=slave, stderr=slave, cwd=tmp_path,
                            env={**ENV, "HOME": str(tmp_path), "TERM": "xterm"})
    os.close(slave)
    try:
        raw = _read_all(master)
    finally:
        os.close(master)
        assert proc.wait(timeout=60) == 1
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw.decode()).replace("\r", "")
    lines = text.splitlines()
    assert "Nothing could be planned: 3 hosts unreachable." in lines
    assert max(len(line) for line in lines) <= 70, text
    assert not any(f"port {port} on 127.0.0.1" in line for line in lines), text  # wrapped
