"""DNS keys from the inventory's own secrets (`secrets:`, age-encrypted to the team;
docs/secrets.md#dns-keys): a TSIG key (`tsig_key_secret`) or a PowerDNS API key
(`api_key_secret`) instead of a key file. Decrypted only by the commands that talk to
the server (where a provider is made), never by `check`.

A PowerDNS API key is sent to the inventory's `api_url`, and an unreviewed change to
the inventory can change that URL as easily as it could rename a secret. So the binding
lives inside the ciphertext: the value is `URL KEY` (the server's URL, a space, the key),
and the key goes only to a zone whose `api_url` has that origin. Nobody can make a
ciphertext of the real key bound elsewhere without knowing the key. A TSIG key is never
sent (it signs), so its value is the key alone.

The parsers (`tsig_key`, `api_key`) are pure; their errors name the secret, never a
part of its value. `value` decrypts (the shell).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision.dnsdata.secrets import origin
from provision.errors import OperationError
from provision.secrets import unlock

from . import tsig

if TYPE_CHECKING:
    from provision.inventory.model import Inventory

_TSIG_FORMS = ("a BIND key block as tsig-keygen writes it, or algorithm:name:secret, with one "
               f"of the algorithms {', '.join(tsig.ALGORITHMS)} and a base64 secret")


def value(inv: Inventory, name: str) -> bytes:
    """Secret `name`'s value: the run's, else decrypted now with the operator's key (exit 1
    naming whom it is encrypted to when that key is not among them)."""
    return unlock.one(inv, name).reveal()


def tsig_key(name: str, data: bytes) -> tuple[str, str, str]:
    """(key name, BIND algorithm, base64 secret) from secret `name`'s value."""
    try:
        return tsig.parse(data.decode("utf-8"))
    except (UnicodeDecodeError, tsig.TsigKeyError):
        # tsig's own words may quote a part of the text, here the secret's value
        raise OperationError(f"secret '{name}' is not a usable TSIG key ({_TSIG_FORMS}); "
                             "nothing was sent") from None


def api_key(name: str, data: bytes, api_url: str) -> str:
    """The PowerDNS API key in secret `name`'s value `URL KEY`, when URL is `api_url`'s
    server; OperationError (nothing sent) otherwise."""
    want = origin(api_url)
    try:
        parts = data.decode("ascii").split()
    except UnicodeDecodeError:
        parts = []
    if len(parts) != 2 or not all(c.isprintable() for c in parts[1]):
        raise OperationError(f"secret '{name}' is not a PowerDNS API key bound to its server: "
                             f"its value is `URL KEY` on one line (e.g. `{want} KEY`); nothing "
                             "was sent")
    try:
        bound = origin(parts[0]) if parts[0].startswith(("https://", "http://")) else ""
    except ValueError:
        bound = ""
    if bound != want:
        raise OperationError(f"secret '{name}' is bound to another server than this zone's "
                             f"api_url {want}: the key is not sent here (its value is `URL KEY`; "
                             "`provision secrets set` it again for this server if it is meant "
                             "for it)")
    return parts[1]
