"""`provision secrets`: set, show, rekey and check the inventory's age-encrypted secrets
(parse, call, print; docs/secrets.md). A value is read from stdin or a prompt that does
not echo, never from argv, and printed only where asked."""

from __future__ import annotations

import sys

import click

from provision.errors import OperationError, UsageError
from provision.inventory.model import Inventory
from provision.secretdata.armor import read
from provision.secretdata.check import adding
from provision.secretdata.fields import check_secret_name
from provision.secretdata.recipients import recipients
from provision.secrets import age, edit, unlock
from provision.secrets.status import owners, status

from .common import echo, inventory_option, load

MAX_VALUE = 48 * 1024  # the armor of this stays under the inventory's limit for one secret


def _identity_option(f: click.decorators.FC) -> click.decorators.FC:
    return click.option("--identity", "identity", metavar="FILE", default=None,
                        help="your SSH private key file (default: $PROVISION_IDENTITY, "
                             "defaults.identity_file, ~/.ssh/id_ed25519, ~/.ssh/id_rsa)")(f)


def _targets(inv: Inventory) -> list[str]:
    keys, unable = recipients([(p.name, p.keys) for p in inv.team], dict(inv.recipients))
    for name in unable:
        echo(f"warning: {name} cannot receive secrets: none of their keys is ssh-ed25519 or "
             "ssh-rsa >= 2048 bits (age cannot encrypt to ECDSA or FIDO keys)", err=True)
    return list(dict.fromkeys(r.key for r in keys))


def _name(name: str) -> str:
    try:
        return check_secret_name(name)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _write(inv: Inventory, updates: dict[str, str]) -> str:
    try:
        return edit.write(inv, updates)
    except edit.WriteBackError as e:
        raise OperationError(str(e)) from None


@click.group("secrets")
def secrets_group() -> None:
    """Secrets in the inventory, encrypted with age to the team's SSH keys."""


@secrets_group.command("set")
@click.argument("name")
@inventory_option
@click.option("--raw", is_flag=True,
              help="keep stdin's bytes exactly (default: one trailing newline is dropped)")
def set_cmd(name: str, inventory_path: str | None, raw: bool) -> None:
    """Encrypt a value (from stdin, or a prompt that does not echo) as secret NAME, to
    every team member's key and the recipients, and write it into the inventory."""
    _name(name)
    with adding():  # services may name it, and others, before they are set
        inv = load(inventory_path)
    if sys.stdin.isatty():
        text = click.prompt(f"value of {name}", hide_input=True, confirmation_prompt=True,
                            err=True)
        value = text.encode("utf-8")
    else:
        value = sys.stdin.buffer.read(MAX_VALUE + 1)
        if not raw and value.endswith(b"\n"):
            value = value[:-1]
    if not value:
        raise UsageError("the value is empty")
    if len(value) > MAX_VALUE:
        raise UsageError(f"the value is over {MAX_VALUE} bytes; a secret is a token or a small file")
    armored = age.encrypt(value, _targets(inv))
    with adding():  # the file is loaded again with the new value before it is written
        file = _write(inv, {name: armored})
    who = sorted({r.owner for r in recipients([(p.name, p.keys) for p in inv.team],
                                              dict(inv.recipients))[0]})
    echo(f"secret {name} set in {file}, encrypted to: {', '.join(who)}")


@secrets_group.command("show")
@click.argument("name")
@inventory_option
@_identity_option
@click.option("--reveal", is_flag=True, help="print it even when stdout is a terminal")
def show_cmd(name: str, inventory_path: str | None, identity: str | None, reveal: bool) -> None:
    """Decrypt secret NAME with your key and write it to stdout (a pipe or a file; a
    terminal only with --reveal)."""
    inv = load(inventory_path)
    if sys.stdout.isatty() and not reveal:
        raise UsageError("refusing to print a secret to a terminal (scrollback, screen "
                         "sharing); pipe it, or pass --reveal")
    sealed = unlock.open_secret(inv, _name(name), unlock.identities(inv, identity))
    out = sys.stdout.buffer
    out.write(sealed.reveal())
    out.flush()


@secrets_group.command("rekey")
@inventory_option
@_identity_option
def rekey_cmd(inventory_path: str | None, identity: str | None) -> None:
    """Re-encrypt every secret to the current team and recipients (after someone joined or
    left); names whoever can no longer read them."""
    inv = load(inventory_path)
    if not inv.secrets:
        echo("no secrets in the inventory")
        return
    targets = _targets(inv)
    ids = unlock.identities(inv, identity)
    team = [(p.name, p.keys) for p in inv.team]
    states, _ = status(dict(inv.secrets), team, dict(inv.recipients))
    current = owners(recipients(team, dict(inv.recipients))[0])
    updates = {}
    for name, _armored in inv.secrets:
        updates[name] = age.encrypt(unlock.open_secret(inv, name, ids).reveal(), targets)
    file = _write(inv, updates)
    for s in states:
        if s.stale:
            echo(f"{s.name}: no longer encrypted to {len(s.stale)} key(s) no longer listed "
                 f"(tags {', '.join(s.stale)})")
        if s.missing or s.partial:
            echo(f"{s.name}: now also encrypted to {', '.join((*s.missing, *s.partial))}")
    echo(f"rekeyed {len(updates)} secret(s) in {file} to: "
         f"{', '.join(sorted(set(current.values())))}")


@secrets_group.command("check")
@inventory_option
def check_cmd(inventory_path: str | None) -> None:
    """Which secrets a current member or recipient cannot decrypt, and which are still
    encrypted to keys no longer listed (from the headers: no private key needed). Exit 1
    when a secret needs `provision secrets rekey`."""
    inv = load(inventory_path)
    states, unable = status(dict(inv.secrets), [(p.name, p.keys) for p in inv.team],
                            dict(inv.recipients))
    for name in unable:
        echo(f"{name}: cannot receive secrets (no ssh-ed25519 or ssh-rsa >= 2048 key)")
    bad = 0
    for s in states:
        n = sum(1 for st in read(dict(inv.secrets)[s.name]).stanzas if st.tag)
        if s.ok:
            echo(f"{s.name}: ok ({n} SSH key(s))")
            continue
        bad += 1
        if s.missing:
            echo(f"{s.name}: cannot be decrypted by {', '.join(s.missing)}")
        if s.partial:
            echo(f"{s.name}: not encrypted to every key of {', '.join(s.partial)}")
        if s.stale:
            echo(f"{s.name}: encrypted to {len(s.stale)} key(s) no longer in the team or "
                 f"recipients (tags {', '.join(s.stale)}): whoever holds them can still read it")
    if bad:
        raise OperationError(f"{bad} secret(s) need `provision secrets rekey`")
