"""Decrypting the inventory's secrets on the operator's machine (the shell): which
identity file, which secrets a run needs, and an error that names whom a secret is for
when the operator's key is not among them (exit 1)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from provision.errors import OperationError, UsageError
from provision.inventory.model import Host, Inventory
from provision.secretdata.armor import ArmorError, read
from provision.secretdata.recipients import recipients
from provision.secretdata.vault import Sealed, Vault

from . import age
from .delivery import deliveries

ENV = "PROVISION_IDENTITY"
_DEFAULTS = ("~/.ssh/id_ed25519", "~/.ssh/id_rsa")


def identities(inv: Inventory, given: str | None = None) -> list[str]:
    """The private key files to try: `given` (--identity), else $PROVISION_IDENTITY, else
    the inventory's defaults.identity_file, else ~/.ssh/id_ed25519 and ~/.ssh/id_rsa."""
    for choice in (given, os.environ.get(ENV)):
        if choice:
            path = Path(choice).expanduser()
            if not path.is_file():
                raise UsageError(f"identity file {choice} does not exist")
            return [str(path)]
    found = [str(p) for p in (Path(x).expanduser() for x in
                              (*([inv.identity_file] if inv.identity_file else []), *_DEFAULTS))
             if p.is_file()]
    if not found:
        raise UsageError(f"no identity file to decrypt secrets with: set {ENV} (or --identity) "
                         "to your SSH private key file; an ssh-agent alone is not enough for "
                         "age (docs/secrets.md#ssh-agent-only)")
    return list(dict.fromkeys(found))


def holders(inv: Inventory, armored: str) -> list[str]:
    """Who a secret is for, as far as its header shows (team members and recipients)."""
    try:
        tags = read(armored).tags
    except ArmorError:
        return []
    keys, _ = recipients([(p.name, p.keys) for p in inv.team], dict(inv.recipients))
    return list(dict.fromkeys(r.owner for r in keys if r.tag in tags))


def open_secret(inv: Inventory, name: str, ids: list[str]) -> Sealed:
    """One secret decrypted. Exit 1 naming whose keys it is for when none of `ids` fits."""
    armored = dict(inv.secrets).get(name)
    if armored is None:
        raise UsageError(f"no secret '{name}' in the inventory (secrets: "
                         f"{', '.join(n for n, _ in inv.secrets) or 'none'})")
    try:
        return Sealed(name, age.decrypt(armored, ids))
    except age.AgeError as e:
        who = holders(inv, armored)
        raise OperationError(f"secret '{name}' does not decrypt with {', '.join(ids)} ({e}); it "
                             f"is encrypted to: {', '.join(who) or 'nobody listed in the team'}") from None


def one(inv: Inventory, name: str) -> Sealed:
    """Secret `name`: the run's, else decrypted now (a command that needs one secret,
    e.g. a DNS key where a provider is made)."""
    found = inv.vault.get(name) if inv.vault is not None else None
    return found if found is not None else open_secret(inv, name, identities(inv))


def needed(hosts: Iterable[Host]) -> tuple[str, ...]:
    """The secrets the services of `hosts` use, each once."""
    return tuple(dict.fromkeys(u.secret for h in hosts for s in h.services for u in s.secrets))


def vault_for(inv: Inventory, hosts: Iterable[Host]) -> Vault | None:
    """The secrets `hosts` need, decrypted (None when they need none: no key is asked for).
    Every value is checked against what it is for here, before any host is connected to:
    a value only decryption shows unfit (a newline in an environment variable) fails the
    run (exit 1) with nothing applied anywhere."""
    hosts = tuple(hosts)
    names = needed(hosts)
    if not names:
        return None
    ids = identities(inv)
    vault = Vault({n: open_secret(inv, n, ids) for n in names})
    for h in hosts:
        for s in h.services:
            deliveries(s, vault)
    return vault
