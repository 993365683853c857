"""Options and output shared by every command: inventory loading, --json, exit codes."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from provision.inventory import Inventory, InventoryError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CHANGES = 0, 1, 2, 3

F = TypeVar("F", bound=Callable[..., Any])


def inventory_option(f: F) -> F:
    return click.option("-i", "--inventory", "inventory_path", type=click.Path(dir_okay=True),
                        default=None, metavar="PATH",
                        help="inventory file or directory (default: $PROVISION_INVENTORY, "
                             "./inventory.yml, ./inventories/)")(f)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="machine-readable output")(f)


def load(path: str | None) -> Inventory:
    """Load the inventory or exit 2 with every problem, one per line, never a traceback."""
    from provision.inventory import load_inventory

    try:
        return load_inventory(path)
    except InventoryError as e:
        fail_usage("\n".join(str(p) for p in e.problems), prefix="")


def fail_usage(message: str, prefix: str = "error: ") -> NoReturn:
    click.echo(f"{prefix}{message}", err=True)
    sys.exit(EXIT_USAGE)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def console(stderr: bool = False) -> Any:
    """A rich Console (imported lazily: rich costs start-up time)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Logs and CI output are read on wide screens: don't fold tables at 80 columns there.
    width = None if stream.isatty() or os.environ.get("COLUMNS") else 120
    return Console(stderr=stderr, highlight=False, width=width)
