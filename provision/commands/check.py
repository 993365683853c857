"""`provision check` and `provision schema`: offline validation and the JSON Schema."""

from __future__ import annotations

import os
import time

import click

from provision.dns.migrate.store import JournalStore
from provision.dnsdata.provider_settings import Credential
from provision.errors import Exit
from provision.exposure import Finding, findings
from provision.inventory import Inventory, InventoryError, Problem, load_inventory
from provision.inventory.schema import json_schema
from provision.inventory.source import SourceDoc, dotted
from provision.ssh import local_files
from provision.text import printable as p

from .common import EXIT_FAILED, EXIT_OK, console, emit_json, inventory_option, json_option

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


@click.command("check")
@inventory_option
@json_option
@click.option("--no-local-files", "no_local_files", is_flag=True,
              help="do not look at the keys, known_hosts and DNS key files the inventory "
                   "names on this machine (checking it where no plan runs, e.g. in CI)")
def check_cmd(inventory_path: str | None, as_json: bool, no_local_files: bool) -> None:
    """Validate the inventory and report cross-layer findings. No network.

    Also looks at the files the inventory names on this machine: an SSH key or
    known_hosts file that plan would fail on is an error, one it can do without a
    warning. Exit 0 when clean or only warnings, 1 when an error-level finding exists,
    2 when the inventory itself is invalid.
    """
    ssh_files: list[local_files.FileProblem] = []

    def local(doc: SourceDoc) -> list[Problem]:
        ssh_files.extend(local_files.problems(local_files.named(doc)))
        return [Problem(*_where(doc, f.field), dotted(f.field), f.message)
                for f in ssh_files if f.severity == "error"]

    inv = load_inventory(inventory_path, also=None if no_local_files else local)
    found = (*findings(inv), *_migration_findings(inv),
             *(() if no_local_files else _dns_file_findings(inv)),
             *(Finding("warning", "ssh-file", dotted(f.field), f.message, f.fix, dotted(f.field))
               for f in ssh_files))
    status = EXIT_FAILED if any(f.severity == "error" for f in found) else EXIT_OK
    creds = _credentials(inv)
    if as_json:
        emit_json({"inventory": inv.source, "ok": status == EXIT_OK,
                   "hosts": len(inv.hosts), "bastions": len(inv.bastions),
                   "findings": [{**f.__dict__, "location": _location(inv, f.field)} for f in found],
                   "credentials": [{**c.__dict__, "line": c.line()} for c in creds]})
        raise Exit(status)
    services = sum(len(h.services) for h in inv.hosts)
    summary = (f"{inv.source}: {len(inv.hosts)} hosts, {len(inv.bastions)} bastions, "
               f"{len(inv.team)} people, {services} services")
    if not found:  # the common case stays fast: no rich import
        click.echo(f"{click.style('ok', fg='green')} {p(summary)}; no findings")
        for c in creds:
            click.echo(f"credentials: {p(c.line())}")
        raise Exit(status)
    from rich.table import Table
    from rich.text import Text

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
    for c in creds:
        out.print(Text(f"credentials: {p(c.line())}"), soft_wrap=True)
    raise Exit(status)


def _where(doc: SourceDoc, field: tuple[str | int, ...]) -> tuple[str, int, int]:
    pos = doc.where(field)
    return pos.file, pos.line, pos.column


def _credentials(inv: Inventory) -> list[Credential]:
    """Where each zone's credential comes from and where it goes (issue 34: a reviewer
    sees which of their secrets a command would use, and for whom). Reads nothing but
    the names in the environment."""
    aws_url = inv.aws.endpoint_url if inv.aws else None
    out = []
    for z in inv.dns.zones if inv.dns else ():
        c = z.settings.credential(z.name, os.environ, aws_url)
        if c is not None:
            out.append(c)
    return out


def _migration_findings(inv: Inventory) -> list[Finding]:
    """Open `dns migrate` journals on this machine older than a day, and migrations
    finalized here whose old values the inventory still declares (offline: the journal
    directory only; a teammate's migration shows in `dns migrate status`, from the zone,
    and their finished one in `dns plan`, from its closed record)."""
    found = JournalStore().all()
    journals = [j for _, j, _ in found if j is not None]
    closed = [j for _, j, _ in JournalStore().closed() if j is not None] if inv.dns else []
    out: list[Finding] = []
    if len(journals) < len(found):
        out = [Finding("warning", "dns-journal-refused", str(path),
                       f"the migration journal {path} is refused: {err}",
                       "move the file away; `provision dns migrate status` reads the "
                       "migration from the zone's marker") for path, j, err in found if j is None]
    if journals:  # the usual case is none: no phase machine to import (~0.2 s of start-up)
        from provision.dns.migrate.phases import overdue_findings

        out += overdue_findings(journals, time.time())
    if closed:  # the same: the guard imports the phase machine
        from provision.dns.migrate.guard import check_findings

        out += check_findings(inv, closed, time.time())
    return out


def _dns_file_findings(inv: Inventory) -> list[Finding]:
    """TSIG key and credentials files, read offline: unusable ones are bad input (exit 2,
    file:line of the field that names them), missing ones a warning."""
    if inv.dns is None or not any(z.settings.local_files for z in inv.dns.zones):
        return []
    from provision.dns.offline import problems  # key and credentials parsers: only when named

    found = problems(inv)
    bad = []
    for fp in found:
        if fp.missing:
            continue
        where = _location(inv, fp.field) or f"{inv.source.split(',')[0]}:1:1"
        file, line, col = where.rsplit(":", 2)
        bad.append(Problem(file, int(line), int(col), fp.field, fp.message))
    if bad:
        raise InventoryError(bad)
    return [Finding("warning", "dns-file-missing", fp.field, fp.message,
                    "create it, or run dns commands where it is") for fp in found]


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
    schema = json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    emit_json(schema)
