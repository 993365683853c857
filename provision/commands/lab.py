"""`provision lab up|down|status|exec`: a lab of real hosts on this machine (root)."""

from __future__ import annotations

import os
import sys
import time

import click
from rich.table import Table
from rich.text import Text

from provision.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    console,
    echo,
    emit_json,
    json_option,
)
from provision.commands.lab_adopt import adopt_cmd, shell_cmd
from provision.commands.lab_common import lab_name, new_plan, state_or_exit
from provision.commands.lab_common import require_root as _require_root
from provision.errors import Exit, OperationError, UsageError
from provision.lab import plan as P
from provision.lab import shell
from provision.lab.state import lab_lock, read_state
from provision.text import printable as p


@click.group("lab")
def lab_group() -> None:
    """A local lab of real hosts (bastion, GPU hosts, BIND, Unbound) in containers.

    The lab name comes from $PROVISION_LAB_NAME (default `lab`); several labs with
    different names run side by side.
    """


@lab_group.command("up")
@click.option("--gpus", type=click.IntRange(1, P.MAX_GPUS), default=2, show_default=True,
              help="number of GPU hosts")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None,
              help="where keys, known_hosts, ssh_config and inventory.yml go "
                   "(default /var/lib/provision-lab/NAME)")
@click.option("--image", type=click.Choice(["default", "cloud"]), default="default",
              show_default=True,
              help="cloud: hosts like a fresh cloud image (cloud-init's sshd drop-ins enabling "
                   "passwords, no package lists or apt sources, the dpkg lock held at boot, "
                   "the last GPU host on socket-activated sshd)")
@json_option
def up_cmd(gpus: int, directory: str | None, image: str, as_json: bool) -> None:
    """Build and boot the lab (a no-op when it is already up)."""
    _require_root()
    name = lab_name()
    if directory is not None and (os.path.realpath(directory) + "/").startswith("/tmp/"):
        raise UsageError("--dir must not be under /tmp: the containers get a fresh /tmp")
    plan = new_plan(name, gpus, directory, image)
    with lab_lock(name):
        state = read_state(name)
        if state is not None:
            old = P.plan_from_state(state)
            rows = shell.status(old, state.get("pids", {}), probe=True)
            if state.get("status") == "up" and all(r["up"] for r in rows):
                msg = (f"lab {name} is already up ({old.gpus} GPU hosts, image {old.image}, "
                       f"dir {old.dir})")
                if (old.gpus, old.dir, old.image) != (plan.gpus, plan.dir, plan.image):
                    msg += "; run `provision lab down` first to change it"
                if as_json:
                    emit_json({"name": name, "dir": old.dir, "already_up": True})
                else:
                    echo(msg)
                return
            echo(f"lab {name} is partly up; tearing it down first", err=True)
            shell.teardown(old, state.get("pids", {}))
        try:
            timings = shell.up(plan)
        except shell.LabError as e:
            raise OperationError(str(e)) from None
    if as_json:
        emit_json({"name": name, "dir": plan.dir, "inventory": plan.paths["inventory"],
                   "seconds": round(timings["total"], 2), "timings": timings})
    else:
        echo(f"lab {name} up in {timings['total']:.1f} s ({plan.image} image): "
              f"{', '.join(n.name for n in plan.containers)}")
        echo(f"  inventory  {plan.paths['inventory']}")
        echo(f"  ssh_config {plan.paths['ssh_config']}")
        echo(f"  operator   provision lab exec -- ssh -F {plan.paths['ssh_config']} gpu1")


@lab_group.command("down")
@json_option
def down_cmd(as_json: bool) -> None:
    """Stop every container and remove namespaces, mounts and state."""
    _require_root()
    name = lab_name()
    t0 = time.monotonic()
    with lab_lock(name):
        state = read_state(name)
        if state is None:
            plan = P.make_plan(name, 1, None, venv=sys.prefix, repo=None)
            if not shell._lab_netns(plan):
                echo(f"lab {name} is not up")
                return
            shell.teardown(plan, {})  # leftovers without state: namespaces/mounts by name
        else:
            shell.teardown(P.plan_from_state(state), state.get("pids", {}))
    secs = time.monotonic() - t0
    if as_json:
        emit_json({"name": name, "seconds": round(secs, 2)})
    else:
        echo(f"lab {name} down in {secs:.1f} s")


@lab_group.command("status")
@json_option
def status_cmd(as_json: bool) -> None:
    """Hosts, addresses and whether each is up (exit 1 when some host is down)."""
    _require_root()
    name = lab_name()
    state = state_or_exit(name)
    plan = P.plan_from_state(state)
    rows = shell.status(plan, state.get("pids", {}))
    all_up = all(r["up"] for r in rows)
    if as_json:
        emit_json({"name": name, "dir": plan.dir, "status": state.get("status"),
                   "inventory": plan.paths["inventory"], "ssh_config": plan.paths["ssh_config"],
                   "up": all_up, "hosts": rows})
    else:
        # the state file under /run is read back: its strings are printed escaped
        t = Table(title=p(f"lab {name} ({plan.dir})"))
        for col in ("host", "addresses", "up", "memory", "init pid"):
            t.add_column(col)
        for r in rows:
            addrs = "\n".join(p(f"{seg}: {' '.join(a)}") for seg, a in r["addresses"].items())
            mem = f"{r['memory_kib'] / 1024:.0f} MiB" if r.get("memory_kib") else ""
            t.add_row(p(str(r["host"])), addrs,
                      Text("up", style="green") if r["up"] else Text("down", style="red"), mem,
                      str(r.get("leader") or ""))
        console().print(t)
    raise Exit(EXIT_OK if all_up else EXIT_FAILED)


@lab_group.command("exec", context_settings={"ignore_unknown_options": True})
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_cmd(command: tuple[str, ...]) -> None:
    """Run COMMAND in the operator namespace (exit code passed through).

    Example: provision lab exec -- ssh -F /var/lib/provision-lab/lab/ssh_config gpu1
    """
    _require_root()
    name = lab_name()
    plan = P.plan_from_state(state_or_exit(name))
    sys.stdout.flush()
    os.execvp("ip", ["ip", "netns", "exec", plan.operator.netns, *command])


lab_group.add_command(adopt_cmd)
lab_group.add_command(shell_cmd)
