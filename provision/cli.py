"""Command-line entry point: a click group whose subcommands are imported only when used.

`provision check` must stay fast and must not import boto3, google-cloud or fabric, so
each command lives in its own module under `provision.commands` and is loaded by name.
"""

from __future__ import annotations

import gc
import importlib
import os

import click

from provision.errors import ProvisionError
from provision.quick_exit import exit_now
from provision.text import printable_lines

# pydantic scans every installed distribution's entry points for plugins when it builds
# the first model's validator (~30 ms of `provision check`); no command uses one. Its
# documented switch turns the scan off for the CLI's process; a user who sets the
# variable keeps their choice.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

# command name -> "module:attribute" (a click.Command). Keep sorted by name.
COMMANDS: dict[str, tuple[str, str]] = {
    "apply": ("provision.commands.converge:apply_cmd", "converge hosts to the inventory"),
    "audit": ("provision.commands.audit:audit_cmd", "live exposure, drift and socket report"),
    "certs": ("provision.commands.certs:certs_group", "TLS certificates of the doors (ACME)"),
    "check": ("provision.commands.check:check_cmd", "validate the inventory and report findings (offline)"),
    "dns": ("provision.commands.dns:dns_group", "DNS records as code, and what every server answers"),
    "exec": ("provision.commands.exec:exec_cmd", "run a command on every selected host"),
    "import": ("provision.commands.import_:import_group", "write existing resources as inventory YAML"),
    "keys": ("provision.commands.keys:keys_group", "API keys of the door: make one, hash one"),
    "lab": ("provision.commands.lab:lab_group", "a local lab of real hosts (root)"),
    "plan": ("provision.commands.converge:plan_cmd", "show what apply would change"),
    "recap": ("provision.commands.recap:recap_group", "merge the --json recaps of shards"),
    "render": ("provision.commands.render:render_cmd", "write every artifact to a directory"),
    "schema": ("provision.commands.check:schema_cmd", "print the inventory JSON Schema"),
    "secrets": ("provision.commands.secrets:secrets_group", "age-encrypted secrets: set, show, rekey, check"),
    "sg": ("provision.commands.sg:sg_group", "AWS security groups: plan and apply"),
    "ssh": ("provision.commands.tunnel:ssh_cmd", "interactive ssh through the jump chain"),
    "ssh-config": ("provision.commands.render:ssh_config_cmd", "print or install the ssh_config"),
    "sync": ("provision.commands.tunnel:sync_cmd", "rsync through the jump chain"),
    "tunnel": ("provision.commands.tunnel:tunnel_cmd", "forward a host's services to localhost"),
}


def load_command(ref: str) -> click.Command:
    """The click command that `ref` ("module:attribute") names, its module imported now."""
    module, attr = ref.split(":")
    # a command's imports leave ~100,000 tracked objects (modules, classes, pydantic's
    # schemas), none of them garbage: the cyclic collector's passes over them while they
    # pile up cost ~4 % of the instructions of `plan`'s imports and inventory load
    collecting = gc.isenabled()
    gc.disable()
    try:
        command = getattr(importlib.import_module(module), attr)
    finally:
        if collecting:
            gc.enable()
    assert isinstance(command, click.Command)
    return command


class LazyGroup(click.Group):
    """Resolves subcommands from COMMANDS on first use; the one place that turns a
    ProvisionError into a message on stderr and its exit status."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        return None if entry is None else load_command(entry[0])

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        if not rows:
            return
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except ProvisionError as e:
            if e.message:
                click.echo(e.prefix + printable_lines(e.message), err=True)
            ctx.exit(e.exit_code)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="provision")
def main() -> None:
    """Declarative GPU-server fleets: hardened hosts, DNS cutovers, one-command tunnels."""


def run() -> None:
    """The console script: `main`, then an exit without the interpreter's teardown
    (`provision.quick_exit`). An uncaught exception still ends the usual way."""
    try:
        main()
    except SystemExit as e:  # click's standalone mode always ends in one
        exit_now(e.code)
    exit_now(0)
