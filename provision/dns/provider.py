"""The one interface every DNS provider implements, and the errors they raise.

No I/O here. A provider is a thin shell over one API; a fourth provider is one module
that implements `Provider` and one line in `provider_for.py`. The operations are the
ones record reconciliation and TTL-lowering migrations need:

* `list_rrsets()` — every RRset of the zone (one paged pass);
* `get_rrset(name, type)` — one RRset, or None;
* `apply(change_set)` — deletions and additions applied atomically; a deletion whose
  RRset no longer matches what was read (someone changed it) raises `StaleRead`;
* `wait(change_set, token, timeout)` — until the provider serves the change (Route53:
  INSYNC; Cloud DNS: `done`; RFC 2136: every authoritative server answers with it);
* `nameservers()` — the zone's authoritative servers as (name, address or None).
"""

from __future__ import annotations

from typing import Protocol

from provision.errors import OperationError

from .records import ChangeSet, RRset


class ProviderError(OperationError):
    """The provider's API failed or refused (exit 1); the message is one line for the user."""


class StaleRead(ProviderError):
    """A deletion's RRset is not what was read: the zone changed between read and write."""


class Provider(Protocol):
    kind: str                 # "route53" | "clouddns" | "rfc2136"
    zone: str                 # absolute zone name
    replan_on_stale: bool     # re-read and re-plan once after StaleRead (Cloud DNS 412)

    def list_rrsets(self) -> list[RRset]: ...

    def get_rrset(self, name: str, rtype: str) -> RRset | None: ...

    def apply(self, changes: ChangeSet) -> str: ...

    def wait(self, changes: ChangeSet, token: str, timeout: float) -> None: ...

    def nameservers(self) -> list[tuple[str, str | None]]: ...
