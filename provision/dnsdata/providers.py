"""The DNS providers: the one table from an inventory's `provider:` to the module that
implements it. A new provider is a module in `provision/dns/providers/` (see
`provision.dns.provider`) and one line here.

No I/O. A module is imported only when an inventory names it (or `provision schema`
describes them all), so an inventory without a Cloud DNS zone never loads its code.
"""

from __future__ import annotations

import functools
import importlib
from typing import Protocol, cast

from provision.dnsdata.provider_settings import Capabilities, ProviderSettings

PROVIDERS: dict[str, str] = {
    "route53": "provision.dns.providers.route53",
    "clouddns": "provision.dns.providers.clouddns",
    "rfc2136": "provision.dns.providers.rfc2136",
    "powerdns": "provision.dns.providers.powerdns",
}


def names() -> tuple[str, ...]:
    return tuple(sorted(PROVIDERS))


class ProviderSpec(Protocol):
    """What the inventory reads of a provider module (`make`, the provider itself, is
    `provision.dns.provider.ProviderModule`, above the inventory)."""

    Settings: type[ProviderSettings]
    CAPABILITIES: Capabilities


@functools.cache
def load(name: str) -> ProviderSpec:
    """The module of provider `name` (KeyError for a name not in the table)."""
    module = importlib.import_module(PROVIDERS[name])
    for attr in ("Settings", "CAPABILITIES", "make"):
        if not hasattr(module, attr):  # a programming error in a new provider module
            raise TypeError(f"{PROVIDERS[name]} does not define {attr} (see provision.dns.provider)")
    return cast(ProviderSpec, module)


def settings_model(name: str) -> type[ProviderSettings]:
    return load(name).Settings


def capabilities(name: str) -> Capabilities:
    return load(name).CAPABILITIES

