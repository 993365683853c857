"""Options and output shared by every command: inventory loading, --json, consoles.

CLI only. Commands raise `provision.errors.ProvisionError` subclasses; `provision.cli`
prints them and exits with their code.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

from provision.errors import EXIT_CHANGES, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from provision.inventory import Inventory, load_inventory
from provision.text import printable, printable_lines

if TYPE_CHECKING:  # rich costs start-up time: `check` with no findings prints without it
    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.segment import Segment

__all__ = ["EXIT_CHANGES", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "console", "echo",
           "emit_json", "inventory_option", "is_terminal", "json_option", "load"]

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
    return load_inventory(path)


def emit_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def echo(line: object, err: bool = False) -> None:
    """One line of plain output: every character `provision.text.printable` escapes is
    escaped (a newline inside `line` too: it is one line). The way commands print a line
    without rich; colours, if any, are added around escaped text, never inside it."""
    click.echo(printable(str(line)), err=err)


def console(stderr: bool = False, file: IO[str] | None = None) -> Console:
    """A rich Console that never interprets markup or emoji codes in what it prints (styles
    come from `rich.text.Text` objects only) and escapes, as a last guard, every character
    `provision.text.printable` escapes in every segment it renders, so no string from
    outside can reach the terminal as a control sequence, whichever call site forgot it.
    On a terminal it wraps to the terminal's width; to a file or a pipe it never wraps.
    (rich is imported lazily: it costs start-up time.)"""
    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        def render(self, renderable: RenderableType,
                   options: ConsoleOptions | None = None) -> Iterable[Segment]:
            for seg in super().render(renderable, options):
                text = seg.text if seg.control else printable_lines(seg.text)
                # line breaks between rendered lines stay; everything else unsafe is escaped
                yield seg if text == seg.text else Segment(text, seg.style, seg.control)

    stream = file or (sys.stderr if stderr else sys.stdout)
    if is_terminal(stream):  # rich asks the terminal its width (COLUMNS, when set, wins)
        return SafeConsole(stderr=stderr, file=file, highlight=False, markup=False,
                           emoji=False)
    # A file or a pipe is grepped, not read on a screen: no line is ever broken, neither a
    # plain one (soft_wrap) nor a table's cell (a width no table reaches).
    return SafeConsole(stderr=stderr, file=file, highlight=False, markup=False, emoji=False,
                       width=UNBOUNDED, soft_wrap=True)


# Wide enough that no table of ours is ever folded to fit; none of our renderables fills
# the width (no Rule, Panel or expanded Table), so no line is padded to it.
UNBOUNDED = 1 << 20


def is_terminal(stream: IO[str]) -> bool:
    """Whether output to `stream` is wrapped to a screen: a terminal, or what rich's
    TTY_COMPATIBLE says (1: treat it as one, 0: never). FORCE_COLOR asks for colours only:
    a coloured CI log is still a log."""
    forced = os.environ.get("TTY_COMPATIBLE", "")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        return stream.isatty()
    except ValueError:  # closed
        return False
