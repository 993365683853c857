"""Settings for the whole suite."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# pytest-xdist workers get COLUMNS=80; the CLI honours COLUMNS as the user's terminal width,
# so output would wrap differently under `make test` (xdist) than under a plain `pytest`.
# Every test sees what CI's non-terminal sees: no COLUMNS (and output that never wraps).
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

LAB = "tests/lab/"
# The lab's files that bring up a lab of their own (a module fixture, never the session's
# `lab`): each is a work unit of its own, started at once on a worker beside the three groups
# below, longest first (measured: `make test` with --junitxml, per file).
LAB_OWN = tuple(f"{LAB}test_{name}.py" for name in ("fleet", "lynis", "cloud_image", "updates",
                                                    "first_hour"))
# The other lab files in three groups, each on a worker of its own with a lab of its own
# (every lab file sets its hosts up itself: a module fixture, never another file's
# leftovers). Split by measured time (a quiet run with --junitxml, per file) so the groups
# end together: in two halves the first took 745 s and the second 614 s of a 768 s run,
# and the machine sat half idle for its last 6 minutes while they waited out TTLs and
# timeouts one test at a time. The third starts with the DNS cutovers on a fresh lab and
# ends with the Ctrl-C tests, which strip gpu1's services and forwarding (nothing after
# them in the group needs those).
LAB_SECOND = frozenset(f"{LAB}test_{name}.py" for name in (
    "dns", "dns_zonecheck", "python_envs", "team_notebooks", "tunnel", "sg_confirm", "lab",
    "effect"))
LAB_THIRD = frozenset(f"{LAB}test_{name}.py" for name in (
    "dns_migrate", "door", "harden", "host_lock", "insiders", "interrupt"))


def lab_unit(nodeid: str) -> str | None:
    """The lab work unit of a test: its file for a file with a lab of its own, else one of
    the three groups; None outside the lab."""
    if not nodeid.startswith(LAB):
        return None
    path = nodeid.split("::")[0]
    if path in LAB_OWN:
        return path
    if path in LAB_SECOND:
        return f"{LAB}#2"
    return f"{LAB}#3" if path in LAB_THIRD else f"{LAB}#1"


# the order units are handed out in, longest first: the groups (one to each worker: xdist
# hands every worker one unit before any gets a second), then the files with labs of
# their own
LAB_ORDER = (f"{LAB}#1", f"{LAB}#3", f"{LAB}#2", *LAB_OWN)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Under `make test` (pytest-xdist), the lab's tests run as a few large work units, the
    lab's units first.

    The lab is a session fixture: every worker that runs a lab test boots a lab of its own,
    so lab tests spread over every worker would boot one lab each. xdist's own
    `xdist_group` marks stopped grouping with pytest 9.2 (pytest-dev/pytest-xdist#1386), so
    the grouping is by path here, in the scheduler, where it cannot silently stop. The
    files with labs of their own need no shared lab: units of their own, so they run beside
    the groups instead of after them in one (the critical path was the half that held
    them: 1106 s of 1135 s).
    """
    if config.getvalue("dist") == "each":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LabFirst(LoadScopeScheduling):  # type: ignore[misc]
        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return lab_unit(nodeid) or nodeid  # one unit per test outside the lab

        def _assign_work_unit(self, node: object) -> None:
            # xdist orders units by test count; a lab unit of one long test (lynis) would
            # wait behind thousands of one-test units: the lab's units go first
            if not self._ordered:
                self._ordered = True
                for unit in reversed(LAB_ORDER):
                    if unit in self.workqueue:
                        self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

    return LabFirst(config, log)


@pytest.fixture
def root_dir() -> Iterator[Path]:
    """A directory on a path only root can change: the batch acts by name nowhere else
    (templates/territory.sh), and /tmp, where tmp_path lives, is everybody's."""
    if os.geteuid() != 0:
        pytest.skip("the batch runs as root on a host: a path only root can change needs root")
    base = Path("/run/provision-tests")
    base.mkdir(mode=0o755, exist_ok=True)
    os.chmod(base, 0o755)
    d = Path(tempfile.mkdtemp(dir=base))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)
