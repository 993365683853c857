"""`provision tunnel`, `provision ssh`, `provision sync`: reach a host through its jump chain."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.table import Table
from rich.text import Text

from provision.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    console,
    echo,
    emit_json,
    inventory_option,
    json_option,
    load,
)
from provision.errors import Exit, OperationError, UsageError
from provision.inventory.fields import parse_port
from provision.ssh.errors import ConnectError, HostKeyError
from provision.ssh.login import choose_login, hops
from provision.text import printable
from provision.tunnel.backends import AUTO, Request, choose, names
from provision.tunnel.local import http_answers, port_accepts, port_is_free
from provision.tunnel.openssh import find_ssh, known_hosts_path, private_dir, write_ssh_config
from provision.tunnel.openssh_argv import ssh_argv
from provision.tunnel.ports import local_port_wanted, plan_forwards, select_services
from provision.tunnel.rsync import remote_side, rsync_argv
from provision.tunnel.session import Interrupted, Session, until_stopped
from provision.tunnel.tokens import ServiceState, check_passed, check_request

if TYPE_CHECKING:
    from provision.inventory.model import Host, Inventory
    from provision.ssh.login import Login
    from provision.tunnel.status import Row

F = TypeVar("F", bound=Callable[..., Any])


def _backend_choices() -> list[str]:
    return [AUTO, *names()]


def _user_option(f: F) -> F:
    return click.option("--user", "user", default=None, metavar="NAME",
                        help="remote account (default: $USER when a team member, else the "
                             "inventory's login user); a team member's identity_file is used")(f)


def _host(inv: Inventory, name: str) -> Host:
    try:
        return inv.node(name)
    except KeyError:
        names = ", ".join(h.name for h in (*inv.hosts, *inv.bastions)) or "none"
        raise UsageError(f"unknown host '{name}' (known: {names})") from None


def _login(inv: Inventory, user: str | None) -> Login:
    return choose_login(inv, user, os.environ.get("USER"))  # LoginError: exit 2


def _parse_ports(values: Sequence[str]) -> dict[str, int]:
    out = {}
    for v in values:
        name, sep, port = v.partition("=")
        if not sep:
            raise UsageError(f"--port expects SERVICE=PORT (1-65535), got {printable(v)!r}")
        try:
            out[name] = parse_port(port, f"--port {printable(v)}")
        except ValueError as e:
            raise UsageError(str(e)) from None
    return out


@click.command("tunnel")
@click.argument("host")
@click.argument("services", nargs=-1)
@inventory_option
@json_option
@_user_option
@click.option("--backend", type=click.Choice(_backend_choices()), default=None,
              help="how to open the tunnel (auto: the first backend usable here, in "
                   "provision.tunnel.backends order); default: $PROVISION_TUNNEL_BACKEND or auto")
@click.option("--keepalive", type=click.IntRange(1, 3600), default=15, show_default=True,
              metavar="SECONDS", help="keepalive interval; the link is dead after 3 misses")
@click.option("--port", "ports", multiple=True, metavar="SERVICE=PORT",
              help="local port for a service (default: the remote port, or a free one near it)")
@click.option("--check", "--once", "check", is_flag=True,
              help="open, print, verify each forward answers, close (exit 1 if one does not)")
def tunnel_cmd(host: str, services: tuple[str, ...], inventory_path: str | None, as_json: bool,
               user: str | None, backend: str | None, keepalive: int, ports: tuple[str, ...],
               check: bool) -> None:
    """Forward HOST's tunnel services (or only SERVICES) to 127.0.0.1 through its jump chain.

    Prints each service's local URL (Jupyter's with its token) and stays in the foreground,
    reconnecting when the link drops, until Ctrl-C.
    """
    inv = load(inventory_path)
    node = _host(inv, host)
    login = _login(inv, user)
    err = console(stderr=True)

    def log(message: str) -> None:  # messages quote hosts' answers and ssh's stderr

        err.print(Text("tunnel:", style="dim") + Text(f" {printable(message)}"), soft_wrap=True)

    chain = hops(inv, node, login)
    chosen = select_services(node, services, chain[-1].user)  # LoginError: exit 2
    forwards = plan_forwards(chosen, port_is_free, _parse_ports(ports))
    for s, f in zip(chosen, forwards, strict=True):
        wanted = local_port_wanted(s, _parse_ports(ports))
        if f.local_port != wanted:
            log(f"{s.name}: local port {wanted} is busy, using {f.local_port}")
    spec = choose(backend or os.environ.get("PROVISION_TUNNEL_BACKEND"))  # UsageError: exit 2
    name = spec.name
    stop = threading.Event()
    _on_signals(stop)
    try:
        be = spec.make(Request(inv, node, login, chain, tuple(forwards), keepalive, log))
    except ConnectError as e:
        raise OperationError(str(e)) from None
    session = Session(be, node, chosen, forwards, chain[-1].user, keepalive, log)
    code = EXIT_OK
    try:
        try:
            table = session.start(stop)
        except Interrupted:
            log("interrupted before the tunnel was up; closing")
            raise Exit(EXIT_FAILED) from None
        except HostKeyError as e:
            raise OperationError(str(e)) from None
        except ConnectError as e:
            raise OperationError(f"cannot connect to {node.name}: {e}") from None
        ready = session.ready_after or 0.0
        if check:
            try:
                code = until_stopped(lambda: _check(session, table, as_json, name, ready), stop)
            except Interrupted:
                log("interrupted; closing")
                code = EXIT_FAILED
        else:
            if as_json:
                emit_json(_doc(node.name, name, ready, table))
                sys.stdout.flush()
            else:
                _print_table(node.name, name, table)
                log(f"ready in {ready:.2f}s via {' → '.join(h.name for h in chain)} ({name}); "
                    f"Ctrl-C to close")
            try:
                session.supervise(stop)
            except HostKeyError as e:
                echo(f"error: {e}", err=True)
                code = EXIT_FAILED
            else:
                log("closing")
    finally:
        session.close()
    raise Exit(code)


def _on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: object) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def _doc(host: str, backend: str, ready: float, table: Sequence[Row]) -> dict[str, Any]:
    return {"host": host, "backend": backend, "ready_seconds": round(ready, 3),
            "forwards": [r.as_dict() for r in table]}


def _print_table(host: str, backend: str, table: Sequence[Row]) -> None:
    # a URL carries the token `jupyter server list` printed on the host: escaped like the rest
    urls = [printable(r.url) for r in table]
    t = Table(title=printable(f"tunnels to {host} ({backend})"))
    t.add_column("service", no_wrap=True)
    # URLs are copied from here: never cut them
    t.add_column("local URL", no_wrap=True, min_width=max((len(u) for u in urls), default=9))
    t.add_column("remote bind", no_wrap=True)
    t.add_column("status", overflow="fold")
    for r, url in zip(table, urls, strict=True):
        style = "red" if r.listening is False else ("yellow" if r.status not in ("ok", "forwarded")
                                                    else "green")
        t.add_row(printable(r.service), url, printable(r.remote), Text(printable(r.status), style=style))
    console().print(t)  # a pipe or a log: never wrapped (common.console)


def _check(session: Session, table: Sequence[Row], as_json: bool, backend: str,
           ready: float) -> int:
    """Each forward must answer an HTTP request (or, for other schemes, accept a connection)."""
    results: dict[str, str | None] = {}
    for f, r in zip(session.forwards, table, strict=True):
        if r.listening is False:
            results[f.service] = None
        elif f.scheme in ("http", "https"):
            state = session.states.get(f.service, ServiceState())
            asked = check_request(state)
            if asked is None:
                echo(f"{f.service}: not asked ({printable(state.note)})", err=True)
                results[f.service] = None
                continue
            path, need_ok = asked
            answer = http_answers(f.local_port, path)
            results[f.service] = answer if check_passed(answer, need_ok) else None
            if answer is not None and results[f.service] is None:
                echo(f"{f.service}: its token was refused ({printable(answer)})", err=True)
        else:
            results[f.service] = "connected" if port_accepts(f.local_port, 5) else None
    if as_json:
        doc = _doc(session.host.name, backend, ready, table)
        for fw in doc["forwards"]:
            fw["answer"] = results[fw["service"]]
        emit_json(doc)
    else:
        _print_table(session.host.name, backend, table)
        for name, answer in results.items():
            echo(f"{name}: {answer or 'no answer'}")
    return EXIT_OK if all(results.values()) else EXIT_FAILED


@click.command("ssh", context_settings={"ignore_unknown_options": False})
@click.argument("host")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@inventory_option
@_user_option
def ssh_cmd(host: str, command: tuple[str, ...], inventory_path: str | None,
            user: str | None) -> None:
    """Interactive ssh to HOST through its jump chain (or run `-- CMD`), host keys verified."""
    inv = load(inventory_path)
    node = _host(inv, host)
    login = _login(inv, user)
    ssh = find_ssh()
    if ssh is None:
        raise UsageError("no `ssh` on PATH")
    raise Exit(_run_with_config(inv, login, lambda cfg: ssh_argv(ssh, cfg, node.name, command),
                              private_dir, write_ssh_config))


@click.command("sync")
@click.argument("src")
@click.argument("dst")
@inventory_option
@_user_option
@click.option("-n", "--dry-run", is_flag=True, help="show what would be transferred")
@click.option("--delete", is_flag=True, help="delete extraneous files on the receiving side")
def sync_cmd(src: str, dst: str, inventory_path: str | None, user: str | None, dry_run: bool,
             delete: bool) -> None:
    """rsync -avhP SRC DST through the jump chain, e.g. `provision sync gpu1:~/ckpt/ ./ckpt/`."""
    inv = load(inventory_path)
    names = [h.name for h in (*inv.hosts, *inv.bastions)]
    remote = [s for s in (src, dst) if remote_side(s, names)]
    if len(remote) != 1:
        raise UsageError("exactly one of SRC and DST must be HOST:PATH with HOST in the inventory "
                   f"(hosts: {', '.join(names) or 'none'})")
    login = _login(inv, user)
    ssh, rsync = find_ssh(), shutil.which("rsync")
    if ssh is None or rsync is None:
        raise UsageError("provision sync needs `ssh` and `rsync` on PATH")
    extra = [*(["--dry-run"] if dry_run else []), *(["--delete"] if delete else [])]
    kh = known_hosts_path(inv)
    raise Exit(_run_with_config(inv, login, lambda cfg: rsync_argv(rsync, ssh, cfg, kh, src, dst, extra),
                              private_dir, write_ssh_config))


def _run_with_config(inv: Inventory, login: Login, argv_for: Callable[[str], list[str]],
                     private_dir: Callable[[], str],
                     write_ssh_config: Callable[[Inventory, Login, str], str]) -> int:
    """Render the config to a private file, run the command in the foreground, clean up."""
    directory = private_dir()
    try:
        cfg = write_ssh_config(inv, login, directory)
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the child gets Ctrl-C
        try:
            return subprocess.call(argv_for(cfg))
        finally:
            signal.signal(signal.SIGINT, previous)
    except OSError as e:
        raise UsageError(str(e)) from None
    finally:
        shutil.rmtree(directory, ignore_errors=True)
