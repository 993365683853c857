"""`provision keys new SERVICE CLIENT` and `provision keys hash`: the door's API keys."""

from __future__ import annotations

import sys

import click

from provision.commands.common import echo, emit_json, inventory_option, json_option, load
from provision.door import keys as K
from provision.errors import UsageError
from provision.inventory.fields import check_name
from provision.text import printable


@click.group("keys")
def keys_group() -> None:
    """API keys of the door (services with https:): only their hashes are kept."""


@keys_group.command("new")
@inventory_option
@click.argument("service")
@click.argument("client")
@json_option
def new_cmd(inventory_path: str | None, service: str, client: str, as_json: bool) -> None:
    """Make a key for CLIENT of SERVICE: the key is printed once (stdout), the hash to put
    under the service's https.keys is printed beside it."""
    try:
        check_name(client)
    except ValueError as e:
        raise UsageError(f"client: {e}") from None
    inv = load(inventory_path)
    found = K.doors_named(inv, service)
    if not found:
        raise UsageError(f"no service {printable(service)!r} with https: in the inventory "
                         "(keys are for services behind the door)")
    key = K.new_key()
    digest = K.digest(key)
    where = [f"hosts.{h.name}.services.{s.name}.https.keys" for h, s in found]
    taken = [w for (h, s), w in zip(found, where, strict=True)
             if s.https and any(k.client == client for k in s.https.keys)]
    if as_json:
        emit_json({"service": service, "client": client, "key": key, "hash": digest,
                   "fields": where, "replaces": taken})
        return
    sys.stdout.write(key + "\n")
    echo(f"the key above is shown once: give it to {client}; provision keeps only its hash.", err=True)
    echo(f"add to {', '.join(where)}:", err=True)
    echo(f'  {client}: "{digest}"', err=True)
    if taken:
        echo(f"({client} has a key there already: this one replaces it at the next apply)", err=True)


@keys_group.command("hash")
def hash_cmd() -> None:
    """Print the hash of a key read from stdin (a key made elsewhere)."""
    key = sys.stdin.readline().rstrip("\r\n")
    if not key or any(c.isspace() or not c.isprintable() for c in key):
        raise UsageError("give the key on stdin, one line of printable characters without spaces")
    sys.stdout.write(K.digest(key) + "\n")
