"""The converge engine behind `provision plan` and `provision apply`: one entry point each
(`plan`, `apply`), called once by the command, which parses before and prints through the
`Hooks` it passes in.

This module selects the hosts (playbook, shard, secrets), imports the playbook's task
code, and starts connecting to the first `--forks` hosts; only then does it import the
rest of the run (`run_phases`: the steps, their templates and Jinja, the facts), ~0.3 s of
imports that take place while the key exchanges and logins are under way. The command's
own output (rich, the plan format) is built by `Hooks`' factory at the same moment.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

from provision.errors import UsageError
from provision.inventory import default_inventory_path
from provision.playbook import Playbook
from provision.pytasks import load as pytasks
from provision.pytasks.load import Imported
from provision.secrets import unlock
from provision.shard import parse_shard, split
from provision.ssh.connect import Chain, Gateways
from provision.ssh.limits import machine_forks
from provision.steps.registry import preload

from .reach import connecting
from .run_job import ApplyOptions, Request, Run

if TYPE_CHECKING:
    from .run_phases import Hooks, Outcome


def setup(req: Request, note: Callable[[str], None]) -> Run:
    """The hosts the run selects, the task code it imports (`Run.imported`), the secrets it
    decrypts; `note` is told what the user should know (bastions left out of a shard)."""
    shard = parse_shard(req.shard_text) if req.shard_text is not None else None
    inv, pb = req.inv, req.pb
    pb, imported = _load_tasks(pb, req.inventory_path, req.task_paths)
    try:
        selected = pb.select(inv, req.hosts)
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
            note(f"shard {shard}: bastions are global, left to their own run "
                 f"(provision apply bastions): {', '.join(h.name for h in bastions)}")
    # the selected hosts' secrets, decrypted here on the operator's machine (exit 1 naming
    # whose keys a secret is for when the operator's is not among them); check and render
    # never decrypt
    vault = unlock.vault_for(inv, selected)
    if vault is not None:
        inv = dataclasses.replace(inv, vault=vault)
    return Run(inv, pb, tuple(selected), imported)


def _load_tasks(pb: Playbook, inventory_path: str | None, task_paths: tuple[str, ...]
                ) -> tuple[Playbook, tuple[Imported, ...]]:
    """Import the playbook's Python tasks (only plan and apply do)."""
    if not pb.tasks:
        return pb, ()
    root = pytasks.root_of(inventory_path or default_inventory_path())
    code, imported = pytasks.load(pb.tasks, root, [Path(t) for t in task_paths])
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


def plan(req: Request, note: Callable[[str], None], hooks: Callable[[Run], Hooks]) -> Outcome:
    """Probe and diff every selected host; `hooks(job)`, made once the connections are under
    way, is told what happens and prints the plan; `note` as for `setup`."""
    job = setup(req, note)
    forks = req.forks or machine_forks()
    with _connecting(job, forks, req.accept_new) as (gateways, early):
        from . import run_phases

        return run_phases.plan(job, forks, req.accept_new, gateways, early, hooks(job))


def apply(req: Request, options: ApplyOptions, note: Callable[[str], None],
          hooks: Callable[[Run], Hooks]) -> Outcome:
    """Plan every selected host under its lock, ask (`Hooks.ask`), apply in waves, renew
    the doors' certificates that may be due; Ctrl-C stops starting hosts (see
    `run_phases.apply`)."""
    job = setup(req, note)
    forks = req.forks or machine_forks()
    with _connecting(job, forks, req.accept_new) as (gateways, early):
        from . import run_phases

        return run_phases.apply(job, forks, req.accept_new, options, gateways, early, hooks(job))
