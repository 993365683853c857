"""An inventory that is a FIFO or a device, given to provision as a real process: refused, no hang."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_hostile_cli import _offline  # noqa: F401 (autouse fixture)

# --- -i: what the inventory path can be ------------------------------------------------

def test_an_inventory_that_is_a_fifo_or_a_device_is_refused_without_hanging(
        tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    os.mkfifo(tmp_path / "fifo.yml")
    (tmp_path / "zero.yml").symlink_to("/dev/zero")
    for name in ("fifo.yml", "zero.yml"):
        # before: open() blocked on the FIFO for ever; /dev/zero was read until memory ran out
        # (the timeout only turns a hang into a failure; nothing is timed)
        proc = subprocess.run([sys.executable, "-m", "provision", "check", "-i",
                               str(tmp_path / name)], capture_output=True, text=True,
                              timeout=120, check=False)
        assert proc.returncode == 2, proc.stderr
        assert "not a regular file" in proc.stderr and "Traceback" not in proc.stderr


def test_a_playbook_path_that_is_a_socket_says_so(tmp_path: Path) -> None:
    """A socket cannot even be opened (ENXIO): before, "cannot read the playbook: No such
    device or address"; now what it is and what --playbook takes (issue 34, class 9)."""
    import socket

    from click.testing import CliRunner

    from provision.cli import main

    inv = tmp_path / "inventory.yml"
    inv.write_text("version: 1\nhosts:\n  gpu1: {address: 10.0.1.21}\n")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(tmp_path / "pb.yml"))
        r = CliRunner().invoke(main, ["plan", "-i", str(inv), "--playbook",
                                      str(tmp_path / "pb.yml")])
    assert r.exit_code == 2, r.output
    assert f"{tmp_path / 'pb.yml'}: a socket, not a regular file: --playbook takes a " \
           "playbook file" in r.stderr, r.stderr
