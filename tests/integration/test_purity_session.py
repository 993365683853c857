"""The purity guard of tests/unit stays out of the session's own finalizers: pytest runs
them in the teardown of the session's last test, which in `pytest tests` is a pure one, and
a lab torn down there must still be able to run its commands (it was refused, and the lab
left running)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_session_finalizer_may_start_processes_after_the_last_pure_test(tmp_path: Path) -> None:
    marker = tmp_path / "finalized"
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "conftest.py").write_text(
        "import subprocess, pytest\n"
        "@pytest.fixture(scope='session')\n"
        "def lab():\n"
        "    yield\n"
        f"    subprocess.run(['touch', {str(marker)!r}], check=True)\n")
    (tmp_path / "a" / "test_a.py").write_text("def test_lab(lab):\n    pass\n")
    (tmp_path / "b").mkdir()
    # the pure folder's own conftest, as tests/unit has it
    (tmp_path / "b" / "conftest.py").write_text((ROOT / "tests/unit/conftest.py").read_text())
    (tmp_path / "b" / "test_b.py").write_text("def test_pure():\n    pass\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--rootdir", str(tmp_path), str(tmp_path / "a"), str(tmp_path / "b")],
                       capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT),
                       "PATH": "/usr/bin:/bin"}, check=False)
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout[-2000:]
    assert marker.exists()
