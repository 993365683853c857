"""`LoadNewUnits` run by sh with a stand-in systemctl that logs its calls: units that
come back `loaded` when asked for cost no daemon-reload; one that does not (an older
systemd, a unit directory whose mtime did not move) gets the full reload, once."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from provision.steps import script
from provision.steps.actions import LoadNewUnits, StartUnit

# `show -p LoadState --value -- UNIT`: a unit named stale*.service is not loaded
FAKE_SYSTEMCTL = """#!/bin/sh
echo "$*" >> "$CALLS"
case "$1" in
  show) case "$6" in stale*) echo not-found;; *) echo loaded;; esac ;;
esac
"""


def calls(tmp_path: Path, units: tuple[str, ...]) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(FAKE_SYSTEMCTL)
    (bin_dir / "systemctl").chmod(0o755)
    (bin_dir / "sleep").write_text("#!/bin/sh\n")
    (bin_dir / "sleep").chmod(0o755)
    log = tmp_path / "calls"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(log)}
    out = subprocess.run(["sh", "-s"], input=script.build([LoadNewUnits(units), StartUnit(units[0])]),
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return log.read_text().splitlines()


def test_units_systemd_loads_on_request_cost_no_reload(tmp_path: Path) -> None:
    got = calls(tmp_path, ("a.service", "b.service"))
    assert got[:3] == ["show -p LoadState --value -- a.service",
                       "show -p LoadState --value -- b.service", "start -- a.service"]
    assert "daemon-reload" not in got


@pytest.mark.parametrize("units", [("stale.service", "b.service"), ("a.service", "stale.service")])
def test_a_unit_that_does_not_load_gets_the_reload_once(tmp_path: Path, units: tuple[str, ...]) -> None:
    got = calls(tmp_path, units)
    assert got.count("daemon-reload") == 1
    assert got.index("daemon-reload") < got.index(f"start -- {units[0]}")
