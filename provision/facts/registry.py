"""Every fact spec the probe knows, in the order the probe runs them. Pure."""

from __future__ import annotations

from typing import Any

from . import files, packages, sockets, system, units, users
from .spec import FactSpec

SPECS: tuple[FactSpec[Any], ...] = (system.SPEC, files.SPEC, users.SPEC, units.SPEC,
                                    packages.SPEC, sockets.SPEC)
BY_NAME: dict[str, FactSpec[Any]] = {s.name: s for s in SPECS}
