"""`exit_now` ends the process as `sys.exit` would (status, atexit handlers, non-daemon
threads, executor workers, buffered output, a failed flush), without the teardown; and the
console script's `run` goes through it with click's exit status."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def quiet_env() -> dict[str, str]:
    """This environment with stdout block-buffered, as a user's shell has it."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60, env=quiet_env())


def test_what_the_usual_exit_does_still_happens(tmp_path: Path) -> None:
    out = child(f"""
        import atexit, threading, time
        from concurrent.futures import ThreadPoolExecutor
        from pathlib import Path
        from provision.quick_exit import exit_now
        d = Path({str(tmp_path)!r})
        atexit.register(lambda: (d / "atexit").write_text("ran"))
        def late():
            time.sleep(0.3)
            (d / "thread").write_text("joined")
        threading.Thread(target=late).start()
        pool = ThreadPoolExecutor(2)  # never shut down: its workers must not hang the exit
        pool.submit(lambda: (d / "pool").write_text("done"))
        print("buffered output", end="")
        exit_now(3)
    """)
    assert out.returncode == 3, out.stderr
    assert out.stdout == "buffered output"
    assert [(tmp_path / n).read_text() for n in ("atexit", "thread", "pool")] == ["ran", "joined", "done"]


@pytest.mark.parametrize(("code", "status", "stderr"), [
    ("None", 0, ""), ("0", 0, ""), ("2", 2, ""), ("256 + 7", 7, ""), ("'it broke'", 1, "it broke\n")])
def test_the_status_is_the_one_sys_exit_gives(code: str, status: int, stderr: str) -> None:
    ours = child(f"from provision.quick_exit import exit_now; exit_now({code})")
    usual = child(f"import sys; sys.exit({code})")
    assert (ours.returncode, ours.stderr) == (usual.returncode, usual.stderr) == (status, stderr)


def test_a_flush_that_fails_is_status_120_as_usual() -> None:
    for code in ("from provision.quick_exit import exit_now as end", "from sys import exit as end"):
        p = subprocess.Popen([sys.executable, "-c", f"{code}; import time; time.sleep(0.5);"
                              " print('x', end=''); end(0)"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=quiet_env())
        assert p.stdout is not None
        p.stdout.close()  # nobody reads: the buffered "x" meets EPIPE at the exit's flush
        assert p.wait(timeout=60) == 120, code


def test_the_console_script_exits_with_clicks_status() -> None:
    out = child("import sys; sys.argv = ['provision', 'no-such-command']; "
                "from provision.cli import run; run()")
    assert out.returncode == 2 and "No such command 'no-such-command'" in out.stderr
    out = child("import sys; sys.argv = ['provision', '--version']; "
                "from provision.cli import run; run()")
    assert out.returncode == 0 and out.stdout.startswith("provision")
