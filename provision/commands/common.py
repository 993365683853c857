"""Options and output shared by every command: inventory loading, --json, consoles.

CLI only. Commands raise `provision.errors.ProvisionError` subclasses; `provision.cli`
prints them and exits with their code.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from provision.errors import EXIT_CHANGES, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from provision.inventory import Inventory

__all__ = ["EXIT_CHANGES", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "console", "emit_json",
           "inventory_option", "json_option", "load"]

F = TypeVar("F", bound=Callable[..., Any])


def inventory_option(f: F) -> F:
    return click.option("-i", "--inventory", "inventory_path", type=click.Path(dir_okay=True),
                        default=None, metavar="PATH",
                        help="inventory file or directory (default: $PROVISION_INVENTORY, "
                             "./inventory.yml, ./inventories/)")(f)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="machine-readable output")(f)


def load(path: str | None) -> Inventory:
    """Load the inventory; an invalid one raises InventoryError (exit 2, every problem)."""
    from provision.inventory import load_inventory

    return load_inventory(path)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def console(stderr: bool = False) -> Any:
    """A rich Console (imported lazily: rich costs start-up time)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Logs and CI output are read on wide screens: don't fold tables at 80 columns there.
    width = None if stream.isatty() or os.environ.get("COLUMNS") else 120
    return Console(stderr=stderr, highlight=False, width=width)
