"""The DNS providers: the one table from an inventory's `provider:` to the module that
implements it. A new provider is a module (see `provider.py`) and one line here.

No I/O. A module is imported only when an inventory names it (or `provision schema`
describes them all), so an inventory without a Cloud DNS zone never loads its code.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, cast

from .provider import Capabilities, Provider, ProviderModule, ProviderSettings

if TYPE_CHECKING:
    from provision.inventory.model import Inventory, Zone

PROVIDERS: dict[str, str] = {
    "route53": "provision.dns.route53",
    "clouddns": "provision.dns.clouddns",
    "rfc2136": "provision.dns.rfc2136",
    "powerdns": "provision.dns.powerdns",
}


def names() -> tuple[str, ...]:
    return tuple(sorted(PROVIDERS))


@functools.cache
def load(name: str) -> ProviderModule:
    """The module of provider `name` (KeyError for a name not in the table)."""
    module = importlib.import_module(PROVIDERS[name])
    for attr in ("Settings", "CAPABILITIES", "make"):
        if not hasattr(module, attr):  # a programming error in a new provider module
            raise TypeError(f"{PROVIDERS[name]} does not define {attr} (see provision.dns.provider)")
    return cast(ProviderModule, module)


def settings_model(name: str) -> type[ProviderSettings]:
    return load(name).Settings


def capabilities(name: str) -> Capabilities:
    return load(name).CAPABILITIES


def provider_for(zone: Zone, inv: Inventory) -> Provider:
    """The provider of an inventory zone (its module's `make`)."""
    return load(zone.provider).make(zone, inv)
