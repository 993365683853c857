"""`provision check` as a user runs it reports every problem of an inventory in one run
(issue 39): schema problems and the cross-checks' together, each at file:line:col."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CORPUS = Path(__file__).parents[1] / "fixtures" / "bad" / "96-every-problem-in-one-run.yml"


def test_the_cli_reports_every_problem_in_one_run() -> None:
    """As a user runs it: exit 2, each problem at file:line:col with its field, no traceback."""
    proc = subprocess.run([sys.executable, "-m", "provision", "check", "-i", str(CORPUS)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    expected = [ln.split()[2:4] for ln in CORPUS.read_text().splitlines()
                if ln.startswith("# expect: ")]
    assert len(expected) >= 5
    for line, field in expected:
        assert f"{CORPUS}:{line}:" in proc.stderr and f": {field}: " in proc.stderr, proc.stderr
    located = [ln for ln in proc.stderr.splitlines() if ln.startswith(f"{CORPUS}:")]
    assert len(located) == 7, proc.stderr  # the six, and gpu2's missing address beside 'adress'
