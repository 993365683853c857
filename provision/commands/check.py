"""`provision check` and `provision schema`: offline validation and the JSON Schema."""

from __future__ import annotations

from typing import Any

import click

from provision.errors import Exit

from .common import EXIT_FAILED, EXIT_OK, emit_json, inventory_option, json_option, load

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


@click.command("check")
@inventory_option
@json_option
def check_cmd(inventory_path: str | None, as_json: bool) -> None:
    """Validate the inventory and report cross-layer findings. No network.

    Exit 0 when clean or only warnings, 1 when an error-level finding exists,
    2 when the inventory itself is invalid.
    """
    from provision.exposure import findings

    inv = load(inventory_path)
    found = (*findings(inv), *_migration_findings())
    status = EXIT_FAILED if any(f.severity == "error" for f in found) else EXIT_OK
    if as_json:
        emit_json({"inventory": inv.source, "ok": status == EXIT_OK,
                   "hosts": len(inv.hosts), "bastions": len(inv.bastions),
                   "findings": [{**f.__dict__, "location": _location(inv, f.field)} for f in found]})
        raise Exit(status)
    services = sum(len(h.services) for h in inv.hosts)
    summary = (f"{inv.source}: {len(inv.hosts)} hosts, {len(inv.bastions)} bastions, "
               f"{len(inv.team)} people, {services} services")
    if not found:  # the common case stays fast: no rich import
        from provision.text import printable

        click.echo(f"{click.style('ok', fg='green')} {printable(summary)}; no findings")
        raise Exit(status)
    from rich.table import Table
    from rich.text import Text

    from provision.text import printable as p

    from .common import console

    out = console()  # inventory text: escaped, and the console interprets no markup
    table = Table(show_header=True, header_style="bold", expand=False)
    for col in ("severity", "where", "finding", "fix"):
        table.add_column(col, overflow="fold")
    for f in found:
        table.add_row(Text(f.severity, style=_STYLE[f.severity]),
                      Text(f"{p(f.subject)}\n") + Text(p(_location(inv, f.field)), style="dim"),
                      p(f.message), p(f.fix))
    out.print(p(summary), soft_wrap=True)
    out.print(table)
    counts = {s: sum(1 for f in found if f.severity == s) for s in ("error", "warning", "info")}
    out.print(", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n))
    raise Exit(status)


def _migration_findings() -> list[Any]:
    """Open `dns migrate` journals on this machine older than a day (offline: the journal
    directory only; a teammate's migration shows in `dns migrate status`, from the zone)."""
    import time

    from provision.dns.migrate.store import JournalStore

    journals = [j for _, j, _ in JournalStore().all() if j is not None]
    if not journals:  # the usual case: no phase machine to import (start-up time)
        return []
    from provision.dns.migrate.phases import overdue_findings

    return overdue_findings(journals, time.time())


def _location(inv: object, field: str) -> str:
    positions = getattr(inv, "positions", {})
    path = field
    while path:
        if path in positions:
            f, line, col = positions[path]
            return f"{f}:{line}:{col}"
        path = path.rsplit(".", 1)[0] if "." in path else ""
    return ""


@click.command("schema")
def schema_cmd() -> None:
    """Print the inventory's JSON Schema (for yaml-language-server and editors)."""
    from provision.inventory.schema import InventoryDoc

    schema = InventoryDoc.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    emit_json(schema)
