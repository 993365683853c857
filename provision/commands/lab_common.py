"""What the `provision lab` commands share: the lab's name, root, its state, the checkout."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import provision
from provision.errors import UsageError
from provision.lab import plan as P
from provision.lab.state import read_state


def lab_name() -> str:
    name = os.environ.get("PROVISION_LAB_NAME", "lab")
    try:
        return P.check_name(name)
    except P.PlanError as e:
        raise UsageError(f"$PROVISION_LAB_NAME: {e}") from None


def require_root() -> None:
    if os.geteuid() != 0:
        raise UsageError("the lab needs root (network namespaces, overlay mounts, systemd-nspawn); "
                   "run it with sudo")


def state_or_exit(name: str) -> dict[str, Any]:
    state = read_state(name)
    if state is None:
        raise UsageError(f"lab {name} is not up (no state in /run/provision-lab/{name}/); "
                         "run `provision lab up` (set $PROVISION_LAB_NAME for another lab)")
    return state


def repo_root() -> str | None:
    root = Path(provision.__file__).resolve().parents[1]
    return str(root) if (root / "pyproject.toml").exists() else None


def new_plan(name: str, gpus: int, directory: str | None, image: str = "default") -> P.LabPlan:
    """The plan `lab up` builds: this venv and checkout bound into every host."""
    extra = tuple(x for x in {sys.base_prefix} if x not in ("/usr", "/") and x != sys.prefix)
    try:
        return P.make_plan(name, gpus, os.path.abspath(directory) if directory else None,
                           venv=sys.prefix, repo=repo_root(), extra_binds=extra, image=image)
    except P.PlanError as e:
        raise UsageError(str(e)) from None
