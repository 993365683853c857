"""The one interface every DNS provider implements, and its errors.

No I/O here. A provider is one module in `provision/dns/providers/` (`route53.py`,
`clouddns.py`, `rfc2136.py`, ...) registered by one line in
`provision.dnsdata.providers`. The module exports:

* `Settings` — a `ProviderSettings` model (`provision.dnsdata.provider_settings`, below
  the inventory, which validates zones with it): the zone fields only this provider has
  (validated when the inventory is loaded, errors at file:line like every other field);
* `CAPABILITIES` — what it can do, as data (octoDNS's `SUPPORTS` is the model);
* `make(zone, inv)` — the `Provider` for a zone whose `settings` are its `Settings`.

A `Provider` does the operations record reconciliation and TTL-lowering migrations need:

* `list_rrsets()` — every RRset of the zone (one paged pass);
* `get_rrset(name, type)` — one RRset, or None;
* `apply(change_set)` — deletions and additions applied atomically; a deletion whose
  RRset no longer matches what was read (someone changed it) raises `StaleRead`;
* `wait(change_set, token, timeout)` — until the provider serves the change (Route53:
  INSYNC; Cloud DNS: `done`; a server that answers itself: every authoritative server
  answers with it);
* `nameservers()` — the zone's authoritative servers as (name, address or None);
* `direct` — (address, port) of the server the provider talks to when that server
  answers DNS queries authoritatively itself (an RFC 2136 primary), else None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast

from provision.dns.rrset import RRset
from provision.dns.zone_plan import ChangeSet
from provision.dnsdata import providers
from provision.dnsdata.provider_settings import Capabilities, ProviderSettings
from provision.errors import OperationError

if TYPE_CHECKING:
    from provision.inventory.model import Inventory, Zone


class ProviderError(OperationError):
    """The provider's API failed or refused (exit 1); the message is one line for the user."""


class StaleRead(ProviderError):
    """A deletion's RRset is not what was read: the zone changed between read and write."""


class Provider(Protocol):
    kind: str                 # the registry name ("route53", ...), for messages
    zone: str                 # absolute zone name
    capabilities: Capabilities

    @property
    def direct(self) -> tuple[str, int] | None: ...

    def list_rrsets(self) -> list[RRset]: ...

    def get_rrset(self, name: str, rtype: str) -> RRset | None: ...

    def apply(self, changes: ChangeSet) -> str: ...

    def wait(self, changes: ChangeSet, token: str, timeout: float) -> None: ...

    def nameservers(self) -> list[tuple[str, str | None]]: ...


class ProviderModule(Protocol):
    """What a provider module exports (checked by `providers.load`)."""

    Settings: type[ProviderSettings]
    CAPABILITIES: Capabilities

    def make(self, zone: Zone, inv: Inventory) -> Provider: ...


def provider_for(zone: Zone, inv: Inventory) -> Provider:
    """The provider of an inventory zone (its module's `make`)."""
    return cast(ProviderModule, providers.load(zone.provider)).make(zone, inv)
