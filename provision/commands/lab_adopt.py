"""`provision lab adopt INVENTORY` (your own inventory, in the lab) and `provision lab shell`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from provision.commands.common import echo, emit_json, json_option, load
from provision.commands.lab_common import lab_name, new_plan, require_root, state_or_exit
from provision.errors import OperationError, UsageError
from provision.inventory.source import load_yaml_text
from provision.lab import adopt as A
from provision.lab import adopt_shell as S
from provision.lab import plan as P
from provision.lab import pyindex as XP
from provision.lab import pyindex_shell as X
from provision.lab import shell
from provision.lab.adopt_write import AdoptError, rewrite
from provision.lab.state import container_leader, lab_lock, read_state
from provision.text import printable as p


def _lab_for(name: str, hosts: int) -> tuple[P.LabPlan, bool]:
    """The running lab, or a new one with a GPU host per host of the inventory."""
    with lab_lock(name):
        state = read_state(name)
        if state is not None:
            plan = P.plan_from_state(state)
            rows = shell.status(plan, state.get("pids", {}), probe=True)
            if state.get("status") != "up" or not all(r["up"] for r in rows):
                raise UsageError(f"lab {name} is not (all) up: `provision lab status` says "
                                 "which host is down; `provision lab up` again")
            return plan, False
        plan = new_plan(name, max(1, min(hosts, P.MAX_GPUS)), None)
        echo(f"bringing up lab {name} with {plan.gpus} GPU host(s) …", err=True)
        try:
            shell.up(plan)
        except shell.LabError as e:
            raise OperationError(str(e)) from None
        return plan, True


@click.command("adopt")
@click.argument("inventory", type=click.Path(dir_okay=False))
@click.option("--out", "out", type=click.Path(file_okay=False), default=None,
              help="where the copy, its TSIG key and the people's lab keys go "
                   "(default: the lab's directory, adopt-STEM)")
@click.option("--wheels", "wheel_dirs", multiple=True, type=click.Path(file_okay=False),
              help="a directory of wheels made with the lab hosts' Python (`/usr/bin/python3 "
                   "-m pip download --only-binary=:all: --dest DIR PACKAGE...`), served as "
                   "they are in preference to the venv's distributions; repeatable")
@json_option
def adopt_cmd(inventory: str, out: str | None, wheel_dirs: tuple[str, ...], as_json: bool) -> None:
    """Copy INVENTORY (one file) into the lab: its hosts become the lab's GPU hosts, its
    bastion the lab's bastion, its zones zones of the lab's BIND.

    Rewritten in the copy: addresses, the login (user, port, identity_file, known_hosts),
    the bastion's allow_ssh_from and egress, the DNS provider and TSIG key, the ACME CA,
    the people's lab keys, public_address (dropped), the venv of services whose default
    env would come from PyPI, and the index_url of declared python envs: the lab serves
    the distributions of the venv that ran `lab up` as a package index (the lab has no
    Internet), or those of --wheels DIR, made with the hosts' Python. Everything else
    stays as written; what the lab cannot stand for is listed. Brings up a lab with a GPU host per host when none is up.

    Then: provision lab exec -- provision apply -i COPY --yes
    """
    require_root()
    name = lab_name()
    src = Path(inventory)
    if src.is_dir():
        raise UsageError(f"{p(inventory)}: lab adopt takes one inventory file, not a directory")
    load(inventory)  # every problem of the inventory first (exit 2), nothing built yet
    text = src.read_text(encoding="utf-8")
    doc = load_yaml_text(text, inventory).data
    wheels = _wheels(wheel_dirs)  # a bad DIR: exit 2 before any lab is brought up
    _, placed, _ = A.placement(doc)
    plan, fresh = _lab_for(name, len(placed))
    dest_dir = Path(os.path.abspath(out or f"{plan.dir}/adopt-{src.stem}"))
    try:
        S.prepare_out(dest_dir)
        view = A.lab_view(plan, tsig_key=str(dest_dir / "tsig.key"),
                          team_keys=S.people_keys(dest_dir, list(doc.get("team") or {}), name),
                          dists=tuple(X.venv_dists(plan.venv).values()), python=(py := X.host_python()),
                          wheels=wheels, tags=XP.host_tags(py, X.host_platforms()))
        adoption = A.adopt(doc, view)
        dest = dest_dir / "inventory.yml"
        S.copy_tsig(plan, dest_dir)
        new = rewrite(text, str(dest), adoption.changes)
        S.write_copy(dest, new)
        with lab_lock(name):
            zones = S.serve_zones(plan, adoption.zones)
            S.record_adoption(plan, zones, adoption.hosts)
            index = (X.publish(plan, adoption.served)
                     if any(c.path[-1] == "index_url" for c in adoption.changes) else None)
    except AdoptError as e:
        raise UsageError(str(e)) from None
    except (shell.LabError, OSError) as e:
        raise OperationError(f"lab adopt: {e}") from None
    if as_json:
        emit_json({"name": name, "inventory": str(dest), "lab_up": fresh,
                   "hosts": adoption.hosts, "bastion": adoption.bastion, "zones": list(zones),
                   "index": index, "packages": list(adoption.packages),
                   "from_wheels": [Path(d.wheel).name for d in adoption.served if d.wheel],
                   "from_venv": [d.name for d in adoption.served if not d.wheel],
                   "changes": [{"field": _field(c.path), "why": c.why} for c in adoption.changes],
                   "not_in_lab": [{"field": _field(u.path), "why": u.why} for u in adoption.unfit]})
        return
    echo(p(f"{inventory} adopted into lab {name}: {dest}"))
    for host, node in adoption.hosts.items():
        echo(p(f"  {host} -> {node} ({plan.address(node)})"))
    if adoption.bastion:
        echo(p(f"  {adoption.bastion} -> bastion ({plan.address('bastion')})"))
    for z in adoption.zones:
        echo(p(f"  zone {z} -> ns1 ({plan.address('ns1')}), TSIG key {dest_dir / 'tsig.key'}"))
    if index and wheel_dirs:
        copied = sum(1 for d in adoption.served if d.wheel)
        echo(p(f"  python envs -> {index} ({copied} wheel(s) from {', '.join(wheel_dirs)}, "
               f"{len(adoption.served) - copied} distribution(s) of {plan.venv} as wheels)"))
    elif index:
        echo(p(f"  python envs -> {index} ({len(adoption.packages)} distribution(s) of "
               f"{plan.venv}, as wheels)"))
    echo(f"{len(adoption.changes)} field(s) rewritten (--json lists them); everything else as written")
    if adoption.unfit:
        echo("not in the lab:")
        for u in adoption.unfit:
            echo(p(f"  {_field(u.path)}: {u.why}"))
    echo(p(f"next: provision lab exec -- provision apply -i {dest} --yes"))


def _wheels(dirs: tuple[str, ...]) -> tuple[XP.Dist, ...]:
    """The wheels of every --wheels DIR; a file that is not a wheel to serve: exit 2."""
    found: dict[str, XP.Dist] = {}
    for d in dirs:
        try:
            for name, dist in X.wheel_dists(d).items():
                if name in found:
                    raise XP.WheelError(f"{dist.wheel}: a second wheel of {name} (with "
                                        f"{found[name].wheel}): keep the one for the lab's hosts")
                found[name] = dist
        except XP.WheelError as e:
            raise UsageError(f"--wheels: {p(str(e))}") from None
    return tuple(found.values())


def _field(path: tuple[str | int, ...]) -> str:
    return ".".join(f"[{k}]" if isinstance(k, int) else str(k) for k in path).replace(".[", "[")


@click.command("shell", context_settings={"ignore_unknown_options": True})
@click.argument("host")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def shell_cmd(host: str, command: tuple[str, ...]) -> None:
    """A root shell in lab host HOST (or COMMAND there, its exit status passed through).

    HOST is a lab host (bastion, gpu1, ns1, resolver) or a host of an adopted inventory.
    It enters every namespace of the container's init (nsenter), so it works where
    machinectl and systemd-run -M cannot (the lab's containers are not registered).

    Example: provision lab shell gpu1 -- id -u
    """
    require_root()
    name = lab_name()
    state = state_or_exit(name)
    plan = P.plan_from_state(state)
    mapped = S.adopted_hosts(plan)
    node = mapped.get(host, host)
    if node not in {n.name for n in plan.containers}:
        names = ", ".join(n.name for n in plan.containers)
        raise UsageError(f"no lab host {p(host)} in lab {name} (hosts: {names}"
                         + (f"; adopted: {', '.join(map(p, mapped))}" if mapped else "") + ")")
    leader = container_leader(int(state.get("pids", {}).get(node) or 0))
    if leader is None:
        raise OperationError(f"{node}: the container is not running (`provision lab status`)")
    sys.stdout.flush()
    os.execvp("nsenter", ["nsenter", "-t", str(leader), "-a", "--",
                          *(command or ("/bin/bash", "-l"))])
