"""The provider for an inventory zone: the one place that maps `provider:` to a module.

No I/O of its own; each provider module (and its SDK) is imported only when a zone
uses it, so `provision check` never loads boto3 or google-cloud.
"""

from __future__ import annotations

from provision.inventory.model import Inventory, Zone

from .provider import Provider


def provider_for(zone: Zone, inv: Inventory) -> Provider:
    resolvers = inv.dns.resolvers if inv.dns else ()
    if zone.provider == "rfc2136":
        from .rfc2136 import Rfc2136Provider

        assert zone.server and zone.tsig_key_file  # the inventory requires both
        return Rfc2136Provider(zone.name, zone.server, zone.port, zone.tsig_key_file,
                               resolvers=resolvers)
    if zone.provider == "route53":
        from .route53 import Route53Provider

        aws = inv.aws
        return Route53Provider(zone.name, hosted_zone_id=zone.hosted_zone_id,
                               endpoint_url=zone.endpoint or (aws.endpoint_url if aws else None),
                               region=aws.region if aws else "us-east-1")
    if zone.provider == "clouddns":
        from .clouddns import CloudDnsProvider

        assert zone.project and zone.managed_zone  # the inventory requires both
        return CloudDnsProvider(zone.name, project=zone.project, managed_zone=zone.managed_zone,
                                endpoint=zone.endpoint, credentials_file=zone.credentials_file)
    raise ValueError(f"unknown DNS provider {zone.provider!r}")
