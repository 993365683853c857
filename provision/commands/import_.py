"""`provision import KIND`: write what already exists as inventory YAML, to adopt it.

A kind is one module with a click command plus one line in `KINDS` (loaded only when
used, like the top-level commands): `dns` (a zone's records), `sg` (AWS security groups).
"""

from __future__ import annotations

import click

from provision.cli import load_command

# kind -> ("module:attribute" of a click.Command, help). Keep sorted by kind.
KINDS: dict[str, tuple[str, str]] = {
    "dns": ("provision.commands.import_dns:import_dns_cmd", "a DNS zone's records"),
    "sg": ("provision.commands.import_sg:import_sg_cmd", "AWS security groups and their rules"),
}


class _Kinds(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(KINDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = KINDS.get(cmd_name)
        return None if entry is None else load_command(entry[0])

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Kinds"):
            formatter.write_dl([(k, KINDS[k][1]) for k in self.list_commands(ctx)])


@click.group("import", cls=_Kinds)
def import_group() -> None:
    """Write existing resources as inventory YAML, so that a plan right after shows no changes."""
