"""`provision certs renew`: the doors' certificates from the inventory's ACME CA."""

from __future__ import annotations

import click

from provision.acme.renew import doors, renew
from provision.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    echo,
    emit_json,
    inventory_option,
    json_option,
    load,
)
from provision.errors import Exit, UsageError


@click.group("certs")
def certs_group() -> None:
    """TLS certificates of the doors (ACME DNS-01 through the inventory's zones)."""


@certs_group.command("renew")
@click.argument("hosts", nargs=-1)
@inventory_option
@json_option
@click.option("--force", is_flag=True, help="renew even what is not due")
@click.option("--accept-new-host-keys", "accept_new", is_flag=True,
              help="trust and record the host key of a host not yet in known_hosts")
def renew_cmd(hosts: tuple[str, ...], inventory_path: str | None, as_json: bool, force: bool,
              accept_new: bool) -> None:
    """Renew every certificate the selected hosts' doors serve (all hosts by default) that
    is due: none yet, less than a third of its lifetime left, the CA's renewal window
    open, or not naming the service's https.name. The key is made on the host and never
    leaves it; the certificate is installed, the door reloaded, and port 443 read back.

    Exit status: 0 when nothing was due or everything due was renewed and is served; 1 when
    any certificate failed (the one in place keeps serving). Safe to run from cron or CI.
    """
    inv = load(inventory_path)
    try:
        selected = inv.select(list(hosts))
    except KeyError as e:
        raise UsageError(f"unknown host or selector {e.args[0]!r}") from None
    if not doors(inv, selected):
        if as_json:
            emit_json({"certificates": []})
        else:
            echo("no door on the selected hosts: no certificate to renew")
        return

    def log(line: str) -> None:
        if not as_json:
            echo(f"  {line}", err=True)

    outcomes = renew(inv, selected, force=force, accept_new=accept_new, log=log)
    if as_json:
        emit_json({"certificates": [o.as_json() for o in outcomes]})
    else:
        for o in outcomes:
            served = f"; port serves {o.served[:16]}…" if o.served else ""
            echo(f"{o.host} {o.name}: {o.status}: {o.reason}{served}")
    raise Exit(EXIT_FAILED if any(o.status == "failed" for o in outcomes) else EXIT_OK)

