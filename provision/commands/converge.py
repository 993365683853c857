"""`provision plan` and `provision apply`: converge hosts to the inventory over SSH.

plan: connect, probe facts once per host, print the diff (coloured unified diffs of files,
then the action list). apply: the same plan, a confirmation (Terraform-style; `--yes`
skips it, no terminal and no `--yes` is a usage error), then one batched remote script
per host that has changes, and a recap table (ok / changed / failed / unreachable).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import getpass
import secrets
import socket
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import click
from rich.table import Table
from rich.text import Text

from provision.errors import Exit, UsageError
from provision.hosts import pytasks
from provision.hosts.confirm import execute_guarded
from provision.hosts.converge import (
    Contention,
    HostRun,
    Memory,
    close,
    execute_in_order,
    in_parallel,
    machine_forks,
    prepare,
)
from provision.hosts.lock import Report, Spec, event_text, new_token, operator_id
from provision.inventory import default_inventory_path
from provision.inventory.model import Host, Inventory
from provision.playbook import DEFAULT_PLAYBOOK, Playbook, waves
from provision.playbook import load as load_playbook
from provision.record import record
from provision.shard import parse_shard, split
from provision.ssh.connect import Gateways
from provision.tasks.actions import (
    AptSources,
    EnsureUser,
    Mkdir,
    RemoveFile,
    RemoveTemps,
    WriteFile,
)
from provision.tasks.commit import CommitConfirmed
from provision.tasks.step import Planned
from provision.text import printable as p

from .common import (
    EXIT_FAILED,
    EXIT_OK,
    console,
    echo,
    emit_json,
    inventory_option,
    json_option,
    load,
)
from .plan_output import Change, Op, Section, exit_status, print_plan, to_json

STATUS_STYLE = {"ok": "green", "changed": "yellow", "pending": "yellow",
                "failed": "bold red", "unreachable": "bold red"}


F = TypeVar("F", bound=Callable[..., None])
T = TypeVar("T")
Tick = Callable[[HostRun], None] | None  # progress callback: one host finished


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
    """What a plan or apply works on: the inventory, the playbook, the hosts it selects."""

    inv: Inventory
    pb: Playbook
    selected: tuple[Host, ...]


def _setup(inventory_path: str | None, playbook_name: str, hosts: tuple[str, ...],
           shard_text: str | None = None, task_paths: tuple[str, ...] = (),
           as_json: bool = False) -> Run:
    shard = parse_shard(shard_text) if shard_text is not None else None

    inv = load(inventory_path)
    pb = load_playbook(playbook_name)  # PlaybookError: exit 2
    pb = _load_tasks(pb, inventory_path, task_paths, as_json)
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
    return Run(inv, pb, tuple(selected))


IMPORTED: list[pytasks.Imported] = []  # the task files this command imported (--json: tasks_imported)


def _load_tasks(pb: Playbook, inventory_path: str | None, task_paths: tuple[str, ...],
                as_json: bool) -> Playbook:
    """Import the playbook's Python tasks (only plan and apply do), saying which files."""
    IMPORTED.clear()
    if not pb.tasks:
        return pb
    root = pytasks.root_of(inventory_path or default_inventory_path())
    code, imported = pytasks.load(pb.tasks, root, [Path(t) for t in task_paths])
    IMPORTED[:] = imported
    if not as_json:
        for i in imported:
            echo(f"imported task code: {i.path} (sha256 {i.sha256[:16]})", err=True)
    return pb.with_code(code)


def _prepare_all(job: Run, forks: int, accept_new: bool, quiet: bool, keep_pending: bool,
                 gateways: Gateways, spec: Spec | None = None) -> list[HostRun]:
    """Connect and probe every host, `forks` at a time, through the run's shared bastion
    hops. A host's connection is closed as soon as it is probed unless it has changes that
    `apply` will send over it, so a plan or a no-op apply never holds more than `forks`
    channels through a bastion. With a lock `spec` (apply) each probe takes the host lock;
    what it waits for is said on stderr as it happens."""
    inv, pb, selected = job.inv, job.pb, job.selected
    contention = None if spec is None else Contention(spec.token, _say_lock_event)
    started = time.monotonic()

    def one(round_spec: Spec | None, h: Host) -> HostRun:
        run = prepare(inv, h, pb, accept_new, gateways, round_spec,
                      None if contention is None else contention.on_event)
        if contention is not None:
            contention.prepared(run)
        if not (keep_pending and run.status == "pending"):
            close(run)
        return run

    todo, done = list(selected), dict[str, HostRun]()
    round_spec = spec
    while todo:
        runs = _with_progress("gathering facts", todo, quiet,
                              functools.partial(in_parallel, functools.partial(one, round_spec),
                                                todo, forks))
        redo: set[str] = set() if contention is None else contention.take_redo()
        for run in runs:
            if run.host.name in redo:
                close(run)  # let go already; probed again from fresh facts
            else:
                done[run.host.name] = run
        todo = [h for h in selected if h.name in redo]
        if spec is not None:  # the wait is bounded over all rounds, not per round
            left = max(0, spec.timeout - int(time.monotonic() - started))
            round_spec = dataclasses.replace(spec, timeout=left)
    return [done[h.name] for h in selected]


def _say_lock_event(host: Host, kind: str, report: Report) -> None:
    text = event_text(report, kind, time.time())
    if text:
        echo(f"{host.name}: {text}", err=True)


def _lock_spec(timeout: int) -> Spec:
    """Who this run is, for the host lock: `$USER@hostname` of this machine, the command."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name in the environment or the passwd database
        user = "unknown"
    return Spec(operator_id(user, socket.gethostname()), "apply",
                new_token(time.time(), secrets.token_hex(6)), timeout)


def _with_progress(what: str, items: Sequence[T], quiet: bool,
                   work: Callable[[Tick], list[HostRun]]) -> list[HostRun]:
    if quiet or not sys.stderr.isatty():
        return work(None)
    total, done = len(items), [0]
    with console(stderr=True).status(f"{what}: 0/{total} hosts") as status:
        def tick(run: HostRun) -> None:
            done[0] += 1
            status.update(f"{what}: {done[0]}/{total} hosts (last: {run.host.name} {run.status})")
        return work(tick)


# --- output ----------------------------------------------------------------------------

def _file_diff(old: str | None, new: str, path: str) -> tuple[str, ...]:
    return tuple(difflib.unified_diff((old or "").splitlines(keepends=True),
                                      new.splitlines(keepends=True),
                                      fromfile="/dev/null" if old is None else f"a{path}",
                                      tofile=f"b{path}"))


def _change(step: str, a: Planned) -> Change:
    """One planned action as a line of the shared plan output."""
    diff: tuple[str, ...] = ()
    op: Op = "~"
    if isinstance(a, WriteFile):
        diff, op = _file_diff(a.old, a.content, a.path), "+" if a.old is None else "~"
    elif isinstance(a, CommitConfirmed | AptSources):
        diff = tuple(x for w in a.writes for x in _file_diff(w.old, w.content, w.path))
    elif isinstance(a, RemoveFile):
        op = "-"
        if a.old is not None:
            diff = tuple(difflib.unified_diff(a.old.splitlines(keepends=True), [],
                                              fromfile=f"a{a.path}", tofile="/dev/null"))
    elif isinstance(a, RemoveTemps):
        op = "-"
    elif (isinstance(a, EnsureUser) and a.create) or isinstance(a, Mkdir):
        op = "+"
    return Change(op, f"[{step}] {a.describe()}", diff=diff, kind=type(a).__name__)


def sections(runs: list[HostRun]) -> list[Section]:
    return [Section(r.host.name, tuple(_change(step, a) for step, a in r.actions),
                    error=r.error if r.status in ("failed", "unreachable") else "",
                    status=r.status if r.status in ("failed", "unreachable") else "",
                    # a guarded step that will not run says why (its guard is the reason)
                    notes=tuple(f"[{d.step}] skipped: {d.why}"
                                for d in r.decisions if not d.run))
            for r in runs]


def _print_plan(runs: list[HostRun]) -> None:
    print_plan(sections(runs))


def _print_recap(runs: list[HostRun], title: str) -> None:
    # the playbook's name and a run's error or note (a host's output) came from outside
    t = Table(title=p(title), title_justify="left")
    for col in ("host", "status", "changed", "remote execs", "seconds", "reason"):
        t.add_column(col, justify="right" if col in ("changed", "remote execs", "seconds") else "left")
    for r in runs:
        t.add_row(p(r.host.name), Text(p(r.status), style=STATUS_STYLE.get(r.status, "")),
                  str(r.done if r.status != "pending" else r.changes), str(r.remote_execs),
                  f"{r.seconds:.2f}", p(r.error or r.note))
    console().print(t)


def _json(runs: list[HostRun], command: str, pb: Playbook, shard: str | None,
          memory: Memory) -> None:
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.status] = counts.get(r.status, 0) + 1
    emit_json({"command": command, "playbook": pb.name, "summary": counts, "shard": shard,
               "control": memory.finish().to_json(),
               "tasks_imported": [i.to_json() for i in IMPORTED],
               "plan": to_json(sections(runs)), "hosts": [r.to_json() for r in runs]})


def _failed(runs: list[HostRun]) -> bool:
    return any(r.status in ("failed", "unreachable") for r in runs)


# --- commands ---------------------------------------------------------------------------

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
    memory = Memory.now(len(job.selected), forks)
    with Gateways() as gateways:
        runs = _prepare_all(job, forks, accept_new, quiet=as_json, keep_pending=False,
                            gateways=gateways)
    if as_json:
        _json(runs, "plan", job.pb, shard_text, memory)
    else:
        _print_plan(runs)
        _print_recap(runs, f"plan: {job.pb.name}")
    raise Exit(exit_status(sections(runs), detailed_exitcode))


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
    memory = Memory.now(len(job.selected), forks)
    timeout = confirm_timeout or job.inv.confirm_timeout
    runs: list[HostRun] = []
    with Gateways() as gateways:  # closed after the hosts' chains, which ride on it
        try:
            runs = _prepare_all(job, forks, accept_new, quiet=as_json, keep_pending=True,
                                gateways=gateways, spec=_lock_spec(lock_timeout))
            pending = [r for r in runs if r.status == "pending"]
            if pending and not as_json:
                _print_plan(runs)
            if pending and not yes and not click.confirm(
                    f"apply {sum(r.changes for r in pending)} change(s) to {len(pending)} host(s)?",
                    default=False, err=True):
                click.echo("apply cancelled; nothing changed", err=True)
                raise Exit(EXIT_FAILED)
            if pending:
                def guarded(run: HostRun) -> HostRun:
                    return execute_guarded(job.inv, run, accept_new, timeout)

                def execute(run: HostRun) -> HostRun:
                    return execute_in_order(run, guarded)  # Python tasks first, in order

                done: dict[str, HostRun] = {}
                for wave in waves(runs, lambda run: run.host):  # bastions settle before their hosts
                    applied = _with_progress("applying", wave, as_json,
                                             functools.partial(in_parallel, execute, wave, forks))
                    done.update((run.host.name, run) for run in applied)
                runs = [done[run.host.name] for run in runs]
        finally:
            for run in runs:
                close(run)
    if as_json:
        _json(runs, "apply", job.pb, shard_text, memory)
    else:
        _print_recap(runs, f"apply: {job.pb.name}")
    raise Exit(EXIT_FAILED if _failed(runs) else EXIT_OK)
