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
