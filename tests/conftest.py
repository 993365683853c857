"""Settings for the whole suite."""

from __future__ import annotations

import os

import pytest

# pytest-xdist workers get COLUMNS=80; the CLI honours COLUMNS as the user's terminal width,
# so output would wrap differently under `make test` (xdist) than under a plain `pytest`.
# Every test sees what CI's non-terminal sees: no COLUMNS, rich's 120 columns.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

LAB = "tests/lab/"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Under `make test` (pytest-xdist), every lab test runs on one worker.

    The lab is a session fixture: a second worker would boot a second lab. xdist's own
    `xdist_group` marks stopped grouping with pytest 9.2 (pytest-dev/pytest-xdist#1386), so
    the grouping is by path here, in the scheduler, where it cannot silently stop.
    """
    if config.getvalue("dist") == "each":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LabOnOneWorker(LoadScopeScheduling):  # type: ignore[misc]
        # one work unit for the whole lab, one per test elsewhere; units are handed out
        # largest first, so the lab starts at once and the others share the rest
        def _split_scope(self, nodeid: str) -> str:
            return LAB if nodeid.startswith(LAB) else nodeid

    return LabOnOneWorker(config, log)
