"""The DNS providers, one module each (`Settings`, `CAPABILITIES`, `make`), registered by
one line in `provision.dnsdata.providers.PROVIDERS` and imported only when a zone names
one (docs/dns-providers.md#adding-a-provider)."""
