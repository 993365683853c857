"""`provision exec HOSTS -- CMD`: one command on every selected host, in parallel.

Hosts are selected as `apply` selects them (names, `role:NAME`, `all`, `bastions`,
comma-separated), reached through the run's shared bastion hops on the one SSH link, as the
login user (or `--user`), the command under `sudo -n` with `--sudo`. An unreachable host
never stops the others. Ctrl-C stops every remote command on its host before exiting.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table
from rich.text import Text

from provision.cluster_job import cluster_of, job_command
from provision.commands.common import console, echo, emit_json, inventory_option, json_option, load
from provision.errors import Exit, UsageError
from provision.hosts.reach import Closing, Unreachable, open_chain, reason
from provision.selection import select

# paramiko (through these) is imported here, before any thread: its first import is not thread-safe
from provision.ssh import exec_run
from provision.ssh.connect import Gateways
from provision.ssh.exec_plan import (
    DEFAULT_CAP,
    Result,
    cut_note,
    exit_code,
    prefixed,
    status_of,
    stop_note,
    summary,
)
from provision.ssh.limits import machine_forks
from provision.ssh.login import choose_login
from provision.text import printable

if TYPE_CHECKING:
    from provision.inventory.model import Host, Inventory
    from provision.ssh.login import Login

EXIT_INTERRUPTED = 130
CONNECT_WINDOW = 5.0  # seconds of retries for a host that is booting or shedding load


@click.command("exec", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("hosts")
@click.argument("command", nargs=-1, required=True)
@inventory_option
@json_option
@click.option("--sudo", is_flag=True, help="run the command as root (sudo -n)")
@click.option("--user", "user", default=None, metavar="NAME",
              help="log in as this team member (with their identity_file) or login user")
@click.option("--stream", is_flag=True,
              help="print lines as they come, prefixed `HOST |` (stdout) and `HOST !` (stderr)")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None, metavar="SECONDS",
              help="stop the command on a host after this long (it counts as failed)")
@click.option("--max-output", "cap", type=click.IntRange(min=0), default=None, metavar="BYTES",
              help="output kept per host and stream (default 1 MiB; the rest is counted, "
                   "and the cut is reported)")
@click.option("--forks", type=click.IntRange(1, 1000), default=None,
              help="hosts at once (default: as apply)")
@click.option("--accept-new", is_flag=True,
              help="record unknown host keys in known_hosts; a changed key is always refused")
def exec_cmd(hosts: str, command: tuple[str, ...], inventory_path: str | None, as_json: bool,
             sudo: bool, user: str | None, stream: bool, timeout: float | None,
             cap: int | None, forks: int | None, accept_new: bool) -> None:
    """Run CMD on every host HOSTS selects (all, bastions, NAME, role:NAME; comma-separated),
    or on every member of a cluster at once (cluster:NAME, alone), each with its job
    environment (MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK, NCCL/GLOO_SOCKET_IFNAME).

    CMD is one shell command line, as `ssh host CMD` takes it (put `--` before it). Prints
    each host's stdout and stderr under its name (or, with --stream, as they come), then a
    recap. Exit 0 when every host ran it and it exited 0, 1 otherwise, 130 on Ctrl-C.
    """
    inv = load(inventory_path)
    patterns = [p for p in hosts.split(",") if p]
    if not patterns:
        raise UsageError("HOSTS is empty (all, bastions, NAME, role:NAME; comma-separated)")
    try:
        cluster = cluster_of(inv, patterns)
    except ValueError as e:
        raise UsageError(str(e)) from None
    selected = select(inv, patterns)
    login = choose_login(inv, user, os.environ.get("USER"))
    line = " ".join(command)
    sent = job_command(cluster, line) if cluster else line
    cap = DEFAULT_CAP if cap is None else cap
    width = max(len(h.name) for h in selected)
    printer = _Printer(width) if stream and not as_json else None

    def report(results: list[Result], interrupted: bool) -> None:
        if as_json:
            emit_json({"command": line, "sudo": sudo, "interrupted": interrupted,
                       "hosts": [r.as_dict() for r in results]})
        else:
            if printer is None:
                _print_grouped(results, cap)
            _print_recap(results, cap)

    results, interrupted = _run_all(inv, selected, login, sent, sudo, cap, timeout,
                                    forks, accept_new, printer, report)
    raise Exit(EXIT_INTERRUPTED if interrupted else exit_code(results))


class _Printer:
    """--stream: whole lines, one writer at a time, escaped."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.lock = threading.Lock()

    def line(self, host: str, stream: str, text: str) -> None:
        with self.lock:
            for out in prefixed(host, text, self.width, "out" if stream == "out" else "err"):
                echo(out, err=stream == "err")


def _run_all(inv: Inventory, selected: tuple[Host, ...], login: Login, line: str, sudo: bool,
             cap: int, timeout: float | None, forks: int | None, accept_new: bool,
             printer: _Printer | None,
             report: Callable[[list[Result], bool], None]) -> tuple[list[Result], bool]:
    """Run the command on every host; `report` the results while the hosts' connections
    close (`Closing`), before the bastion hops they ride on."""
    stop = threading.Event()
    interrupted = False
    workers = max(1, min(forks or machine_forks(), len(selected)))
    closing = Closing()
    background = len(selected) <= workers  # no worker moves on to another host meanwhile
    with Gateways() as gateways, ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_one, inv, h, login, line, sudo, cap, timeout, accept_new,
                               gateways, stop, printer, closing, background) for h in selected]
        previous = _on_signals(stop)
        try:
            _wait(futures, stop)
            if stop.is_set():
                interrupted = True
                echo("interrupted: stopping the command on every host", err=True)
                _wait(futures, None)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        results = [f.result() for f in futures]
        report(results, interrupted)
        closing.wait()
        return results, interrupted


def _on_signals(stop: threading.Event) -> dict[int, Any]:
    """Ctrl-C, SIGTERM and SIGHUP set `stop` (each host's runner then kills its command on
    the host); installed even when the shell started us with SIGINT ignored (`cmd &`)."""
    def handler(signum: int, frame: object) -> None:
        stop.set()

    return {sig: signal.signal(sig, handler)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}


def _wait(futures: list[Future[Result]], stop: threading.Event | None) -> None:
    """Until every host is done (returning as the last one is), or `stop` is set (looked at
    every 50 ms)."""
    pending = set(futures)
    while pending:
        if stop is not None and stop.is_set():
            return
        _, pending = wait(pending, timeout=0.05)


def _one(inv: Inventory, host: Host, login: Login, line: str, sudo: bool, cap: int,
         timeout: float | None, accept_new: bool, gateways: Gateways, stop: threading.Event,
         printer: _Printer | None, closing: Closing, background: bool) -> Result:
    t0 = time.monotonic()
    if stop.is_set():
        return Result(host.name, "interrupted", None, 0.0, error="interrupted before connecting")
    try:
        chain = open_chain(inv, host, accept_new, CONNECT_WINDOW, gateways, login)
    except Unreachable as e:
        return Result(host.name, "unreachable", None, time.monotonic() - t0, error=str(e))
    try:
        on_line = None if printer is None else (
            lambda stream, text: printer.line(host.name, stream, text))
        ran = exec_run.run(chain, line, sudo=sudo, cap=cap, timeout=timeout, stop=stop,
                           on_line=on_line)
    except Exception as e:  # a connection that broke mid-command: this host only
        return Result(host.name, "unreachable", None, time.monotonic() - t0,
                      error=f"connection lost: {reason(e)}")
    finally:
        closing.close(chain.close, background)
    why = "timed out" if ran.timed_out else "interrupted" if ran.interrupted else ""
    return Result(host.name, status_of(ran.exit_status, ran.timed_out, ran.interrupted, ran.stop),
                  ran.exit_status, time.monotonic() - t0, ran.stdout.text(), ran.stderr.text(),
                  ran.stdout.total, ran.stderr.total, ran.stdout.cut, ran.stderr.cut,
                  stop_note(why, ran.stop) if why else "",
                  None if ran.stop is None else ran.stop.outcome)


def _print_grouped(results: list[Result], cap: int) -> None:
    for r in results:
        exit_text = "-" if r.exit_status is None else str(r.exit_status)
        head = f"── {r.host} ({r.status}, exit {exit_text}, {r.seconds:.2f}s)"
        echo(head)
        for text in r.stdout.splitlines():
            echo(text)
        if r.stdout_cut:
            echo(cut_note("stdout", r.stdout_bytes, cap))
        if r.stderr or r.stderr_cut:
            echo(f"── {r.host} stderr", err=True)
            for text in r.stderr.splitlines():
                echo(text, err=True)
            if r.stderr_cut:
                echo(cut_note("stderr", r.stderr_bytes, cap), err=True)


STYLE = {"ok": "green", "failed": "bold red", "unreachable": "bold red", "timeout": "bold red",
         "interrupted": "yellow"}


def _print_recap(results: list[Result], cap: int) -> None:
    t = Table(title=printable(f"exec recap: {summary(results)}"))
    for col in ("host", "status", "exit", "seconds"):
        t.add_column(col, no_wrap=True, justify="right" if col in ("exit", "seconds") else "left")
    t.add_column("note", overflow="fold")
    for r in results:
        t.add_row(printable(r.host), Text(r.status, style=STYLE[r.status]),
                  "-" if r.exit_status is None else str(r.exit_status), f"{r.seconds:.2f}",
                  printable(r.note(cap)))
    console().print(t)
