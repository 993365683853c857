"""A bad inventory checked by provision as a real process: exit 2, every problem, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_real_process_prints_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "inv.yml"
    bad.write_text("version: 1\nhosts:\n  gpu1: {address: '10.0.0.1\\nX', port: 0}\n")
    proc = subprocess.run([sys.executable, "-m", "provision", "check", "-i", str(bad)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2, proc.stderr  # both problems reported at once
    assert all(line.startswith(f"{bad}:3:") for line in lines)
