"""Inventory loading: YAML with positions -> schema -> immutable model. Reads the inventory
files (the only I/O); everything after that is pure."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from provision.text import printable

from .errors import InventoryError, Problem
from .model import Inventory
from .source import SourceDoc, load_source

__all__ = ["Inventory", "InventoryError", "Problem", "default_inventory_path", "load_inventory"]


def default_inventory_path() -> Path:
    """$PROVISION_INVENTORY, else ./inventory.yml, else ./inventories/ (docs/architecture.md#cli-conventions)."""
    env = os.environ.get("PROVISION_INVENTORY")
    if env:
        return Path(env)
    if Path("inventory.yml").exists():
        return Path("inventory.yml")
    return Path("inventories")


def load_inventory(path: str | os.PathLike[str] | None = None,
                   also: Callable[[SourceDoc], list[Problem]] | None = None) -> Inventory:
    """Load and validate an inventory file or directory. Raises InventoryError. `also`:
    further problems of the document (`check`'s files on this machine), reported in the
    same run as the inventory's own."""
    # Not at the top: importing provision.inventory.model (its types, as most modules
    # do) runs this file; build brings the schema's pydantic models (~0.3 s) with it.
    from .build import build

    p = Path(path) if path is not None else default_inventory_path()
    if not p.exists():
        what = (f"a symbolic link to {printable(os.readlink(p))}, which does not exist"
                if p.is_symlink() else "no such file or directory")
        raise InventoryError([Problem(str(p), 0, 0, "", f"{what} "
                                      "(give -i PATH or set PROVISION_INVENTORY)")])
    doc = load_source(p)
    extra = also(doc) if also is not None else []
    try:
        inv = build(doc)
    except InventoryError as e:
        raise InventoryError([*e.problems, *extra]) from None
    if extra:
        raise InventoryError(extra)
    return inv
