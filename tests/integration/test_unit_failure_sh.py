"""The batch script run by sh with a stand-in systemctl: a failed start prints the unit's
result and journal, a unit that dies after starting is caught once per batch, units that
start finish the batch."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from provision.tasks import script
from provision.tasks.actions import RestartUnit, StartUnit

FAKE_SYSTEMCTL = """#!/bin/sh
# start/restart of a unit named bad*.service fails; one named dies*.service starts, then is
# no longer active (a simple service whose command exits at once)
case "$1" in
  start|restart) case "$3" in bad*) exit 1;; *) exit 0;; esac ;;
  show) case "$3" in Result) echo exit-code;; ExecMainStatus) echo 1;; esac ;;
  -q) case "$4" in dies*) exit 3;; *) exit 0;; esac ;;
  is-active) case "$3" in dies*|bad*) echo failed; exit 3;; *) echo active;; esac ;;
esac
"""
FAKE_JOURNALCTL = """#!/bin/sh
i=1; while [ $i -le 12 ]; do echo "2026-11-30T03:00:0$i host app[1]: line $i of $2"; i=$((i+1)); done
"""


def run_batch(tmp_path: Path, actions: list[Any]) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("systemctl", FAKE_SYSTEMCTL), ("journalctl", FAKE_JOURNALCTL),
                       ("sleep", "#!/bin/sh\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(["sh", "-s"], input=script.build(actions), capture_output=True,
                          text=True, env=env)


def test_a_failed_start_prints_result_and_journal(tmp_path: Path) -> None:
    out = run_batch(tmp_path, [StartUnit("ok.service"), StartUnit("bad.service"),
                               StartUnit("never.service")])
    assert out.returncode != 0
    assert script.parse_progress(out.stdout) == (1, False)
    f = script.unit_failure(out.stderr)
    assert f is not None
    assert (f.unit, f.result, f.exec_main_status) == ("bad.service", "exit-code", "1")
    assert len(f.journal) == 12 and f.journal[-1].endswith("line 12 of bad.service")
    assert "bad.service did not start (result exit-code, exit status 1" in f.summary()
    assert f.summary().endswith("line 12 of bad.service")
    assert f.to_json()["journal"] == list(f.journal)


def test_a_unit_that_dies_after_starting_is_caught_once_per_batch(tmp_path: Path) -> None:
    text = script.build([StartUnit("ok.service"), RestartUnit("dies.service")])
    assert text.count("\nprovision_settled ") == 1  # one pause, after the last start
    out = run_batch(tmp_path, [StartUnit("ok.service"), RestartUnit("dies.service")])
    assert out.returncode != 0 and script.parse_progress(out.stdout) == (1, False)
    f = script.unit_failure(out.stderr)
    assert f is not None and f.unit == "dies.service"


def test_units_that_start_finish_the_batch(tmp_path: Path) -> None:
    out = run_batch(tmp_path, [StartUnit("ok.service"), RestartUnit("fine.service")])
    assert out.returncode == 0, out.stderr
    assert script.parse_progress(out.stdout) == (1, True)
    assert script.unit_failure(out.stderr) is None
