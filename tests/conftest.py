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
# The lab's files in two halves, each on a worker of its own with a lab of its own (every
# lab file sets its hosts up itself: a module fixture, never another file's leftovers).
# Split by measured time (`make test`'s slowest list): DNS, envs, notebooks and tunnels here;
# converge, fleet, audit, hardening and the rest in the other half.
LAB_SECOND = frozenset(f"{LAB}test_{name}.py" for name in (
    "dns", "dns_migrate", "dns_zonecheck", "python_envs", "team_notebooks", "tunnel",
    "sg_confirm", "cloud_image", "lab"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Under `make test` (pytest-xdist), the lab's tests run on two workers, each half of
    them on one worker.

    The lab is a session fixture: every worker that runs a lab test boots a lab of its own,
    so lab tests spread over every worker would boot one lab each. xdist's own
    `xdist_group` marks stopped grouping with pytest 9.2 (pytest-dev/pytest-xdist#1386), so
    the grouping is by path here, in the scheduler, where it cannot silently stop.
    """
    if config.getvalue("dist") == "each":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LabOnOneWorker(LoadScopeScheduling):  # type: ignore[misc]
        # two work units for the lab, one per test elsewhere; units are handed out
        # largest first, so both halves of the lab start at once and the others share the rest
        def _split_scope(self, nodeid: str) -> str:
            if not nodeid.startswith(LAB):
                return nodeid
            return f"{LAB}#2" if nodeid.split("::")[0] in LAB_SECOND else f"{LAB}#1"

    return LabOnOneWorker(config, log)


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
