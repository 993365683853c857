"""Certificates from an ACME CA (RFC 8555), DNS-01 through the inventory's own zones."""
