"""Fabric tasks over a provision inventory, run with `fab`:

    fab -r examples uptime --inventory inventory.yml
    fab -r examples disk --inventory inventory.yml --hosts role:gpu-server
    fab -r examples gpus --inventory inventory.yml --hosts gpu1,gpu2

Every connection comes from `provision.fleet`: through the host's bastions, host keys
checked against the inventory's known_hosts, the inventory's users and identity files.
Host output is printed through `provision.text.printable` (a host may send anything).
See docs/fleet-api.md.
"""

from __future__ import annotations

from fabric import Connection, task
from fabric.exceptions import GroupException
from invoke.context import Context

from provision import fleet
from provision.text import printable


def _run_on(inventory: str | None, hosts: str, command: str, user: str | None = None) -> None:
    """`command` on every selected host at once; one line per host; fails if any host did."""
    with fleet.Fleet(fleet.load(inventory), user=user) as f:
        group = f.group(hosts.split(","))
        try:
            results = group.run(command, hide=True, warn=True)
            failed: dict[Connection, object] = {}
        except GroupException as e:  # a host we could not reach: the others still ran
            results, failed = e.result, dict(e.result.failed)
        for conn in group:
            name = f.name(conn)
            r = results.get(conn)
            if conn in failed:
                print(f"{name}: unreachable: {printable(str(failed[conn]))}")
            elif r is not None:
                out = printable(r.stdout.strip()) or printable(r.stderr.strip())
                print(f"{name}: exit {r.exited}: {out}")
        bad = [f.name(c) for c in group if c in failed or results[c].exited != 0]
        if bad:
            raise SystemExit(f"failed on: {', '.join(bad)}")


@task(help={"inventory": "inventory file or directory", "hosts": "all, NAME, role:NAME, bastions "
            "(comma-separated)", "user": "log in as this team member or login user"})
def uptime(c: Context, inventory: str | None = None, hosts: str = "all",
           user: str | None = None) -> None:
    """uptime on every selected host, in parallel (a fabric.ThreadingGroup)."""
    _run_on(inventory, hosts, "uptime", user)


@task(help={"inventory": "inventory file or directory", "hosts": "host patterns"})
def disk(c: Context, inventory: str | None = None, hosts: str = "all") -> None:
    """Free space on / of every selected host."""
    _run_on(inventory, hosts, "df -h --output=avail / | tail -n 1")


@task(help={"inventory": "inventory file or directory", "hosts": "host patterns"})
def gpus(c: Context, inventory: str | None = None, hosts: str = "all") -> None:
    """The GPUs each host sees (nvidia-smi -L), one host after the other."""
    with fleet.Fleet(fleet.load(inventory)) as f:
        for host in f.select(hosts.split(",")):
            conn = f.connection(host)
            r = conn.run("nvidia-smi -L 2>/dev/null || echo 'no nvidia-smi'", hide=True, warn=True)
            print(f"{host.name}: {printable(r.stdout.strip())}")


@task(help={"inventory": "inventory file or directory", "hosts": "host patterns"})
def whoami(c: Context, inventory: str | None = None, hosts: str = "all") -> None:
    """The login user, then root through sudo (Fabric's `Connection.sudo`), on each host."""
    with fleet.Fleet(fleet.load(inventory)) as f:
        for host in f.select(hosts.split(",")):
            conn = f.connection(host)
            me = conn.run("id -un", hide=True).stdout.strip()
            root = conn.sudo("id -un", hide=True).stdout.strip()
            print(f"{host.name}: {printable(me)} (sudo: {printable(root)})")
