"""`provision import dns`: a zone's records as inventory YAML.

Reads the zone through its provider (one listing, no change), turns it into inventory
YAML with the pure `provision.dns.adopt`, reads that YAML back as an inventory and checks
that it declares exactly the RRsets it was made from (so a plan right after adopting
shows no changes), and writes it to stdout or a file. No ownership marker is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import yaml
from pydantic import ValidationError

from provision.dns.adopt import Adopted, adopt, comment_text
from provision.dns.provider import provider_for
from provision.dns.rrset import desired
from provision.dnsdata import providers
from provision.dnsdata.names import origin
from provision.dnsdata.provider_settings import ProviderSettings
from provision.errors import OperationError, UsageError
from provision.inventory import InventoryError
from provision.inventory.build import build
from provision.inventory.fields import check_zone
from provision.inventory.model import Inventory, Zone
from provision.inventory.source import load_yaml_text

from .common import echo, load


@click.command("dns")
@click.option("-i", "--inventory", "inventory_path", type=click.Path(dir_okay=True), default=None,
              metavar="PATH", help="the inventory that names the zone's provider and settings")
@click.option("--zone", "zone_name", required=True, metavar="ZONE", help="the zone to import")
@click.option("--provider", type=click.Choice(providers.names()), default=None,
              help="the zone's provider, when the inventory does not declare the zone (only "
                   "for a provider that needs no settings: route53)")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="write the YAML here (default: stdout)")
def import_dns_cmd(inventory_path: str | None, zone_name: str, provider: str | None,
                   output: str | None) -> None:
    """Write a zone's records (the types provision manages; the others as comments) as
    inventory YAML. Adopting is not owning: no ownership marker is written, so records
    are not deleted when left out, until a `dns apply` changes them."""
    inv = load(inventory_path)
    zone = _zone(inv, zone_name, provider)
    dns_provider = provider_for(zone, inv)
    actual = dns_provider.list_rrsets()
    adopted = adopt(origin(zone.name), actual, inv.dns.owner if inv.dns else None)
    # Route53's weighted/latency/... records are left out of its listing (their names)
    unlisted = [str(x) for x in getattr(dns_provider, "skipped", ())]
    text = render(zone, adopted, unlisted)
    _check_round_trip(text, zone, adopted, inv.tree)
    for s in adopted.skipped:
        if not s.why.startswith(("type ", "provision's own marker")):
            echo(f"warning: not imported: {s.line(zone.name)}", err=True)
    for line in unlisted:
        echo(f"warning: not imported: {_routing(line)}", err=True)
    if output:
        Path(output).write_text(text, encoding="ascii")
        echo(f"wrote {len(adopted.imported)} record set(s) of zone {zone.name} to {output} "
             f"({len(adopted.skipped) + len(unlisted)} listed as comments)", err=True)
    else:
        click.echo(text, nl=False)


def _zone(inv: Inventory, name: str, provider: str | None) -> Zone:
    """The inventory's zone `name`, or (with --provider) one with that provider's default
    settings."""
    try:
        key = check_zone(name)
    except ValueError as e:
        raise UsageError(f"--zone: {e}") from None
    declared = {z.name: z for z in (inv.dns.zones if inv.dns else ())}
    if key in declared:
        zone = declared[key]
        if provider is not None and provider != zone.provider:
            raise UsageError(f"--provider {provider}: the inventory ({inv.source}) declares zone "
                             f"{key} with provider {zone.provider}")
        return zone
    if provider is None:
        raise UsageError(f"zone {key} is not in the inventory ({inv.source}): declare it under "
                         "dns.zones with its provider and settings (records: {}), or pass "
                         "--provider")
    try:
        settings = providers.settings_model(provider).model_validate({})
    except ValidationError as e:
        missing = ", ".join(str(err["loc"][0]) for err in e.errors())
        raise UsageError(f"--provider {provider} needs {missing}: declare zone {key} under "
                         "dns.zones with them (records: {}) and import again") from None
    return Zone(key, provider, (), settings)


def _routing(record: str) -> str:
    return comment_text(f"{record[:300]}  (a routing-policy record: the inventory has none)")


def render(zone: Zone, adopted: Adopted, unlisted: Sequence[str] = ()) -> str:
    """The YAML: a whole inventory holding the zone, its skipped records (and the
    provider's records it did not list, `unlisted`) as comments."""
    doc = {"version": 1, "dns": {"zones": {zone.name: {
        "provider": zone.provider, **_settings(zone.settings), "records": adopted.records}}}}
    lines = [f"# provision import dns --zone {zone.name}: {len(adopted.imported)} record "
             "set(s); adopting is not owning (no ownership marker is written)"]
    if adopted.skipped or unlisted:
        lines.append("# not imported:")
        lines += [f"#   {s.line(zone.name)}" for s in adopted.skipped]
        lines += [f"#   {_routing(r)}" for r in unlisted]
    body = yaml.safe_dump(doc, sort_keys=False, allow_unicode=False, default_flow_style=False,
                          width=1000)
    return "\n".join(lines) + "\n" + body


def _settings(s: ProviderSettings) -> dict[str, Any]:
    return {k: v for k, v in s.model_dump(exclude_defaults=True).items() if v is not None}


def _check_round_trip(text: str, zone: Zone, adopted: Adopted, tree: str = "") -> None:
    """The written YAML, read as an inventory, declares exactly the imported RRsets. It
    is read as if beside the inventory it came from (`tree`): its key files are that
    inventory's."""
    try:
        source = load_yaml_text(text, "<import>")
        source.tree = tree
        inv = build(source)
    except InventoryError as e:
        raise OperationError(f"import dns: the YAML written for zone {zone.name} does not "
                             f"load as an inventory (a bug): {comment_text(str(e))[:500]}") from None
    assert inv.dns is not None
    got = set(desired(inv.dns.zones[0]))
    want = {rr for rr in adopted.imported}
    if got != want:
        raise OperationError(f"import dns: the YAML written for zone {zone.name} would not "
                             f"declare what the zone holds (a bug): "
                             f"{comment_text(str(sorted(got ^ want))[:500])}")
