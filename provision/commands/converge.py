"""`provision plan` and `provision apply`: converge hosts to the inventory over SSH.

plan: connect, probe facts once per host, print the diff (coloured unified diffs of files,
then the action list). apply: the same plan, a confirmation (Terraform-style; `--yes`
skips it, no terminal and no `--yes` is a usage error), then one batched remote script
per host that has changes, and a recap table (ok / changed / failed / unreachable).

The command parses (the inventory, the playbook, the options), calls the engine once
(`provision.hosts.run.plan` / `.apply`: it selects the hosts, starts connecting to the
first of them, and only then imports the rest of the run and asks for the output hooks),
and exits with the status the outcome implies. What is printed is `converge_output`'s,
imported while the first connections are under way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import click

from provision.errors import EXIT_FAILED, EXIT_OK, Exit, UsageError
from provision.hosts import run as engine
from provision.hosts.run_job import ApplyOptions, Request, Run
from provision.interrupt import EXIT_INTERRUPTED
from provision.playbook import DEFAULT_PLAYBOOK
from provision.playbook import load as load_playbook

from .common import echo, inventory_option, json_option, load

if TYPE_CHECKING:
    from provision.hosts.run_phases import Hooks

F = TypeVar("F", bound=Callable[..., None])


def _common(f: F) -> F:
    f = click.option("--accept-new", is_flag=True,
                     help="record unknown host keys in known_hosts (like StrictHostKeyChecking="
                          "accept-new); a changed key is always refused")(f)
    f = click.option("--forks", type=click.IntRange(1, 1000), default=None,
                     help="hosts worked on at once (default: 16 per CPU, as the open-file "
                          "limit allows, 4..256)")(f)
    f = click.option("--shard", "shard_text", default=None, metavar="K/N",
                     help="only the hosts in slice K of N (a stable hash of the name); "
                          "bastions are left to a run of their own (`apply bastions`)")(f)
    f = click.option("--playbook", "playbook_name", default=DEFAULT_PLAYBOOK,
                     show_default=True, metavar="NAME",
                     help="a shipped playbook name or a path to a playbook .yml")(f)
    f = click.option("--tasks", "task_paths", multiple=True, metavar="PATH",
                     help="also allow the playbook's Python tasks to be imported from this "
                          "file or directory (outside the inventory's directory); repeatable")(f)
    f = json_option(f)
    f = inventory_option(f)
    return click.argument("hosts", nargs=-1)(f)


def _request(inventory_path: str | None, playbook_name: str, hosts: tuple[str, ...],
             shard_text: str | None, task_paths: tuple[str, ...], forks: int | None,
             accept_new: bool) -> Request:
    """The command's input, checked: the inventory, the playbook (exit 2 when bad)."""
    inv = load(inventory_path)
    pb = load_playbook(playbook_name)  # PlaybookError: exit 2
    return Request(inv, pb, hosts, inventory_path, shard_text, task_paths, forks,
                          accept_new)


def _note(line: str) -> None:
    echo(line, err=True)


@click.command("plan")
@_common
@click.option("--detailed-exitcode", is_flag=True,
              help="exit 3 when changes are pending (0 none, 1 a host failed)")
def plan_cmd(hosts: tuple[str, ...], inventory_path: str | None, as_json: bool,
             playbook_name: str, task_paths: tuple[str, ...], shard_text: str | None,
             forks: int | None, accept_new: bool, detailed_exitcode: bool) -> None:
    """Show what apply would change on HOSTS (all, NAME, role:NAME; default: the playbook's)."""
    req = _request(inventory_path, playbook_name, hosts, shard_text, task_paths, forks, accept_new)
    status: list[int] = []

    def hooks(job: Run) -> Hooks:
        from . import converge_output  # rich and the plan output, while the hosts connect

        return converge_output.plan_hooks(as_json, shard_text, detailed_exitcode, status)(job)

    engine.plan(req, _note, hooks)
    raise Exit(status[0])


@click.command("apply")
@_common
@click.option("--yes", "-y", is_flag=True, help="do not ask before applying")
@click.option("--confirm-timeout", type=click.IntRange(1, 3600), default=None, metavar="SECONDS",
              help="firewall/sshd changes roll back on the host unless confirmed over a new "
                   "connection within this time (default: the inventory's "
                   "defaults.confirm_timeout, 30)")
@click.option("--lock-timeout", type=click.IntRange(0, 86400), default=180, show_default=True,
              metavar="SECONDS",
              help="wait this long for another run's lock on a host (and for a rollback "
                   "armed there) before that host fails")
def apply_cmd(hosts: tuple[str, ...], inventory_path: str | None, as_json: bool,
              playbook_name: str, task_paths: tuple[str, ...], shard_text: str | None,
              forks: int | None, accept_new: bool, yes: bool, confirm_timeout: int | None,
              lock_timeout: int) -> None:
    """Converge HOSTS (all, NAME, role:NAME; default: the playbook's) and print a recap."""
    if not yes and not sys.stdin.isatty():
        raise UsageError("apply asks for confirmation, and stdin is not a terminal; "
                         "review `provision plan`, then run apply with --yes")
    req = _request(inventory_path, playbook_name, hosts, shard_text, task_paths, forks, accept_new)

    def hooks(job: Run) -> Hooks:
        from . import converge_output  # rich and the plan output, while the hosts connect

        return converge_output.apply_hooks(as_json, shard_text, yes)(job)

    out = engine.apply(req, ApplyOptions(confirm_timeout, lock_timeout), _note, hooks)
    if out.interrupted:
        raise Exit(EXIT_INTERRUPTED)
    raise Exit(EXIT_FAILED if out.failed or out.certs_failed else EXIT_OK)
