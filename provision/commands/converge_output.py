"""What `provision plan` and `provision apply` print (the run itself is
`provision.hosts.run`'s): the plan, the recap table, the JSON, the question before
anything changes, and the progress board (`live`), as the `Hooks` the engine is given.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence

import click
from rich.table import Table
from rich.text import Text

from provision.errors import Exit
from provision.headline import apply_line
from provision.hosts.converge import HostRun
from provision.hosts.interrupt import EXIT_INTERRUPTED
from provision.hosts.progress import NOT_STARTED, Board
from provision.hosts.run_job import Run
from provision.hosts.run_phases import Hooks, Outcome
from provision.steps.action import FileChange
from provision.steps.step import Planned
from provision.text import printable as p

from .common import EXIT_FAILED, console, echo, emit_json
from .live import Display, wanted
from .plan_output import Change, Section, exit_status, print_plan, to_json

STATUS_STYLE = {"ok": "green", "changed": "yellow", "pending": "yellow",
                "failed": "bold red", "unreachable": "bold red", NOT_STARTED: "cyan"}


# --- output ----------------------------------------------------------------------------

def _file_diff(f: FileChange) -> tuple[str, ...]:
    """A file written (`new`) or removed (`new` None) as a unified diff."""
    return tuple(difflib.unified_diff((f.old or "").splitlines(keepends=True),
                                      (f.new or "").splitlines(keepends=True),
                                      fromfile="/dev/null" if f.old is None else f"a{f.path}",
                                      tofile="/dev/null" if f.new is None else f"b{f.path}"))


def _change(step: str, a: Planned) -> Change:
    """One planned action as a line of the shared plan output (each says its own sign,
    line and files)."""
    diff = tuple(x for f in a.plan_files() for x in _file_diff(f))
    return Change(a.plan_op(), f"[{step}] {a.describe()}", diff=diff, kind=type(a).__name__)


def sections(runs: list[HostRun]) -> list[Section]:
    return [Section(r.host.name, tuple(_change(step, a) for step, a in r.actions),
                    error=r.error if r.status in ("failed", "unreachable") else "",
                    status=r.status if r.status in ("failed", "unreachable") else "",
                    # a guarded step that will not run says why (its guard is the reason)
                    notes=tuple(f"[{d.step}] skipped: {d.why}"
                                for d in r.decisions if not d.run),
                    # nvidia-smi's view of the host's GPUs (none: no line)
                    info=tuple(x for x in [r.facts.gpus.summary if r.facts else ""] if x))
            for r in runs]


def _print_plan(runs: list[HostRun]) -> None:
    print_plan(sections(runs))


def _print_recap(runs: list[HostRun], title: str) -> None:
    # the playbook's name and a run's error or note (a host's output) came from outside
    t = Table(title=p(title), title_justify="left")
    for col in ("host", "status", "changed", "remote execs", "seconds", "reason"):
        t.add_column(col, justify="right" if col in ("changed", "remote execs", "seconds") else "left")
    for r in runs:
        t.add_row(p(r.host.name), Text(p(r.status.replace("-", " ")),
                                       style=STATUS_STYLE.get(r.status, "")),
                  str(r.done if r.status != "pending" else r.changes), str(r.remote_execs),
                  f"{r.seconds:.2f}", p(r.error or r.note))
    console().print(t)


def _json(out: Outcome, command: str, shard: str | None) -> None:
    runs, job, memory = out.runs, out.job, out.memory
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.status] = counts.get(r.status, 0) + 1
    emit_json({"command": command, "playbook": job.pb.name, "summary": counts, "shard": shard,
               "control": memory.finish().to_json(),
               "tasks_imported": [i.to_json() for i in job.imported],
               "plan": to_json(sections(runs)), "hosts": [r.to_json() for r in runs],
               "interrupted": out.interrupted})


def _ask(pending: list[HostRun]) -> None:
    """The question before anything changes; no (or Ctrl-C there) ends the command."""
    try:
        go = click.confirm(f"apply {sum(r.changes for r in pending)} change(s) to "
                           f"{len(pending)} host(s)?", default=False, err=True)
    except click.Abort:  # Ctrl-C (or end of input) at the question
        click.echo("\napply cancelled; nothing changed", err=True)
        raise Exit(EXIT_INTERRUPTED) from None
    if not go:
        click.echo("apply cancelled; nothing changed", err=True)
        raise Exit(EXIT_FAILED)


def _interrupted_headline(runs: Sequence[HostRun]) -> str:
    """The last line after Ctrl-C: what the run did before it stopped, by status."""
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.status] = counts.get(r.status, 0) + 1
    said = ", ".join(f"{n} {status.replace('-', ' ')}" for status, n in counts.items())
    return f"interrupted (Ctrl-C): {said}; run apply again to finish"


def plan_hooks(as_json: bool, shard_text: str | None, detailed_exitcode: bool,
               status: list[int]) -> Callable[[Run], Hooks]:
    """`plan`'s output: the plan and the recap (or --json); the exit status it implies is
    put in `status`."""
    def report(out: Outcome) -> None:
        if as_json:
            _json(out, "plan", shard_text)
        else:
            _print_plan(out.runs)
            _print_recap(out.runs, f"plan: {out.job.pb.name}")
        status.append(exit_status(sections(out.runs), detailed_exitcode))

    def made(job: Run) -> Hooks:
        _imported(job, as_json)
        return Hooks(Display(Board(), wanted(as_json)), report)
    return made


def apply_hooks(as_json: bool, shard_text: str | None, yes: bool) -> Callable[[Run], Hooks]:
    """`apply`'s output: the plan and the question before anything changes, then the
    recap (or --json) and its last line, or after Ctrl-C what was done."""
    def show_plan(runs: list[HostRun]) -> None:
        if not as_json:
            _print_plan(runs)

    def report(out: Outcome) -> None:
        if as_json:
            _json(out, "apply", shard_text)
        else:
            _print_recap(out.runs, f"apply: {out.job.pb.name}")
            if not out.interrupted:
                echo(apply_line([r.status for r in out.runs]))
        if out.interrupted:
            echo(_interrupted_headline(out.runs), err=True)

    def made(job: Run) -> Hooks:
        _imported(job, as_json)
        return Hooks(Display(Board(), wanted(as_json)), report, show_plan=show_plan,
                     ask=None if yes else _ask, log=lambda line: echo(line, err=True))
    return made


def _imported(job: Run, as_json: bool) -> None:
    """The task files the run imported (--json lists them in its output instead)."""
    if not as_json:
        for i in job.imported:
            echo(f"imported task code: {i.path} (sha256 {i.sha256[:16]})", err=True)
