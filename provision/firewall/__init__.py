"""The host firewall as data: rules, rulesets and the chains we own (pure, no I/O)."""
