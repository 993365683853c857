"""`provision plan` and `provision apply`: converge hosts to the inventory over SSH.

plan: connect, probe facts once per host, print the diff (coloured unified diffs of files,
then the action list). apply: the same plan, a confirmation (Terraform-style; `--yes`
skips it, no terminal and no `--yes` is a usage error), then one batched remote script
per host that has changes, and a recap table (ok / changed / failed / unreachable).

This module checks what the command was given (inventory, playbook, hosts, task code)
and starts connecting to the first hosts; only then does it import the rest of the run
(`converge_run`: the steps, their templates and Jinja, the facts, the output), ~0.3 s of
imports that take place while the key exchanges and logins are under way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TypeVar

import click

from provision.errors import UsageError
from provision.hosts import pytasks
from provision.hosts.pytasks import Imported
from provision.hosts.reach import connecting
from provision.inventory import default_inventory_path
from provision.inventory.model import Host, Inventory
from provision.playbook import DEFAULT_PLAYBOOK, Playbook
from provision.playbook import load as load_playbook
from provision.record import record
from provision.secrets import unlock
from provision.shard import parse_shard, split
from provision.ssh.connect import Chain, Gateways
from provision.ssh.limits import machine_forks
from provision.tasks.registry import preload

from .common import echo, inventory_option, json_option, load

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


@record
class Run:
    """What a plan or apply works on: the inventory, the playbook, the hosts it selects,
    and the task files it imported."""

    inv: Inventory
    pb: Playbook
    selected: tuple[Host, ...]
    imported: tuple[Imported, ...] = ()


def _setup(inventory_path: str | None, playbook_name: str, hosts: tuple[str, ...],
           shard_text: str | None = None, task_paths: tuple[str, ...] = (),
           as_json: bool = False) -> Run:
    shard = parse_shard(shard_text) if shard_text is not None else None

    inv = load(inventory_path)
    pb = load_playbook(playbook_name)  # PlaybookError: exit 2
    pb, imported = _load_tasks(pb, inventory_path, task_paths, as_json)
    try:
        selected = pb.select(inv, hosts)
    except KeyError as e:
        known = ", ".join(h.name for h in inv.hosts)
        raise UsageError(f"no host matches {e.args[0]!r} (hosts: {known}; or all, bastions, "
                         "role:NAME)") from None
    if not selected:
        raise UsageError(f"playbook {pb.name} (hosts: {', '.join(pb.hosts)}) selects no host here")
    if shard is not None:
        mine, bastions = split(selected, shard, lambda h: h.name, lambda h: h.is_bastion)
        selected = tuple(mine)
        if bastions:
            echo(f"shard {shard}: bastions are global, left to their own run "
                 f"(provision apply bastions): {', '.join(h.name for h in bastions)}", err=True)
    # the selected hosts' secrets, decrypted here on the operator's machine (exit 1 naming
    # whose keys a secret is for when the operator's is not among them); check and render
    # never decrypt
    vault = unlock.vault_for(inv, selected)
    if vault is not None:
        inv = dataclasses.replace(inv, vault=vault)
    return Run(inv, pb, tuple(selected), imported)


def _load_tasks(pb: Playbook, inventory_path: str | None, task_paths: tuple[str, ...],
                as_json: bool) -> tuple[Playbook, tuple[Imported, ...]]:
    """Import the playbook's Python tasks (only plan and apply do), saying which files."""
    if not pb.tasks:
        return pb, ()
    root = pytasks.root_of(inventory_path or default_inventory_path())
    code, imported = pytasks.load(pb.tasks, root, [Path(t) for t in task_paths])
    if not as_json:
        for i in imported:
            echo(f"imported task code: {i.path} (sha256 {i.sha256[:16]})", err=True)
    return pb.with_code(code), tuple(imported)


def _connect_first(job: Run, forks: int, accept_new: bool,
                   gateways: Gateways) -> dict[str, Future[Chain]]:
    """Start connecting to the hosts the run's first `forks` workers take (the run never
    holds more chains than that at once); each is taken up by its host's `prepare`."""
    return {h.name: connecting(job.inv, h, accept_new, gateways) for h in job.selected[:forks]}


def _drop(early: dict[str, Future[Chain]]) -> None:
    """Close the chains no host's worker took up (the run stopped before it got there),
    as each finishes opening."""
    def close(fut: Future[Chain]) -> None:
        if fut.exception() is None:
            fut.result().close()

    for fut in early.values():
        fut.add_done_callback(close)


@contextlib.contextmanager
def _connecting(job: Run, forks: int, accept_new: bool
                ) -> Iterator[tuple[Gateways, dict[str, Future[Chain]]]]:
    """The run's shared bastion hops, with the first hosts' connections under way and the
    playbook's steps imported meanwhile; on the way out, the connections no worker took
    up are closed, then the hops (after the hosts' chains, which ride on them)."""
    with Gateways() as gateways:
        early = _connect_first(job, forks, accept_new, gateways)
        try:
            preload(job.pb.steps)
            yield gateways, early
        finally:
            _drop(early)


@click.command("plan")
@_common
@click.option("--detailed-exitcode", is_flag=True,
              help="exit 3 when changes are pending (0 none, 1 a host failed)")
def plan_cmd(hosts: tuple[str, ...], inventory_path: str | None, as_json: bool,
             playbook_name: str, task_paths: tuple[str, ...], shard_text: str | None,
             forks: int | None, accept_new: bool, detailed_exitcode: bool) -> None:
    """Show what apply would change on HOSTS (all, NAME, role:NAME; default: the playbook's)."""
    job = _setup(inventory_path, playbook_name, hosts, shard_text, task_paths, as_json)
    forks = forks or machine_forks()
    with _connecting(job, forks, accept_new) as (gateways, early):
        from . import converge_run

        converge_run.plan(job, forks, accept_new, as_json, shard_text, detailed_exitcode,
                          gateways, early)


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
    job = _setup(inventory_path, playbook_name, hosts, shard_text, task_paths, as_json)
    forks = forks or machine_forks()
    with _connecting(job, forks, accept_new) as (gateways, early):
        from . import converge_run

        converge_run.apply(job, forks, accept_new, as_json, shard_text, yes,
                           confirm_timeout, lock_timeout, gateways, early)
