"""Inventory loading: YAML with positions -> schema -> immutable model. Reads the inventory
files (the only I/O); everything after that is pure."""

from __future__ import annotations

import os
from pathlib import Path

from provision.text import printable

from .errors import InventoryError, Problem
from .model import Inventory

__all__ = ["Inventory", "InventoryError", "Problem", "default_inventory_path", "load_inventory"]


def default_inventory_path() -> Path:
    """$PROVISION_INVENTORY, else ./inventory.yml, else ./inventories/ (docs/architecture.md#cli-conventions)."""
    env = os.environ.get("PROVISION_INVENTORY")
    if env:
        return Path(env)
    if Path("inventory.yml").exists():
        return Path("inventory.yml")
    return Path("inventories")


def load_inventory(path: str | os.PathLike[str] | None = None) -> Inventory:
    """Load and validate an inventory file or directory. Raises InventoryError."""
    from .build import build
    from .source import load_source

    p = Path(path) if path is not None else default_inventory_path()
    if not p.exists():
        what = (f"a symbolic link to {printable(os.readlink(p))}, which does not exist"
                if p.is_symlink() else "no such file or directory")
        raise InventoryError([Problem(str(p), 0, 0, "", f"{what} "
                                      "(give -i PATH or set PROVISION_INVENTORY)")])
    return build(load_source(p))
