"""DNS as data, below the inventory: names, record values, zone visibility, owners,
where credentials may go, where key files may lie, and the provider table with the
settings each provider adds to a zone. No provider code and no network: the engines in
`provision.dns` use these from above (docs/architecture.md#floors)."""
