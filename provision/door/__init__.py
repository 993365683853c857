"""The front door: a TLS-terminating reverse proxy (HAProxy) with API keys and rate
limits in front of a public service (docs/door.md)."""
