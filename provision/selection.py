"""Host selection by pattern (pure): names, `all`, `bastions`, `role:NAME`, `cluster:NAME`, as `provision
exec`, the Fabric API (`provision.fleet`) and the example fabfile take them."""

from __future__ import annotations

from collections.abc import Iterable

from provision.errors import UsageError
from provision.inventory.model import Host, Inventory


class HostSelectionError(UsageError):
    """A pattern matches no host; exit status 2 on the command line."""


def select(inv: Inventory, patterns: Iterable[str]) -> tuple[Host, ...]:
    """Hosts by name, `all`, `bastions` or `role:NAME`, in inventory order, each once;
    no pattern: every host. The same selection as `provision apply` and `exec`."""
    pats = tuple(patterns)
    try:
        return inv.select(pats)
    except KeyError as e:
        known = ", ".join(h.name for h in (*inv.hosts, *inv.bastions)) or "none"
        raise HostSelectionError(f"no host matches {e.args[0]!r} (hosts: {known}; or all, "
                                 "bastions, role:NAME, cluster:NAME)") from None
