"""API keys of the door (pure apart from the random source): a new key, its digest.

A key is `pk-` and 43 URL-safe characters (256 bits from `secrets`); only
`sha256:<hex>` of it is kept, in the inventory and on the host. The key itself is
shown once, to whoever runs `provision keys new`, and never stored by provision.
"""

from __future__ import annotations

import hashlib
import secrets

from provision.inventory.https import DIGEST_PREFIX
from provision.inventory.model import Host, Inventory, Service

PREFIX = "pk-"


def new_key() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def digest(key: str) -> str:
    """What the inventory keeps: `sha256:` and the hex SHA-256 of the key's bytes, as
    the door computes it from the Authorization header."""
    return DIGEST_PREFIX + hashlib.sha256(key.encode()).hexdigest()


def doors_named(inv: Inventory, service: str) -> list[tuple[Host, Service]]:
    return [(h, s) for h in inv.hosts for s in h.services if s.name == service and s.https]
