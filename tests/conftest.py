"""Settings for the whole suite."""

from __future__ import annotations

import os

# pytest-xdist workers get COLUMNS=80; the CLI honours COLUMNS as the user's terminal width,
# so output would wrap differently under `make test` (xdist) than under a plain `pytest`.
# Every test sees what CI's non-terminal sees: no COLUMNS, rich's 120 columns.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)
