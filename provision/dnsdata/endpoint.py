"""Where credentials may go: API endpoints checked before a token or signature is sent.

Pure, no I/O. A Route53 request is signed (SigV4) and a Cloud DNS request carries a
bearer token; over plain HTTP anyone on the path reads or replays them. So an endpoint
(the inventory's `endpoint`/`endpoint_url`, a credentials file's `token_uri`) must be
https://, except for a loopback address (a local moto server or fake, in tests). An
endpoint that is not the provider's own is allowed (moto, a fake, a private endpoint)
and named in the plan's header, so a reviewer sees where credentials go.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback(host: str) -> bool:
    h = host.strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def problem(url: str, what: str) -> str:
    """Why credentials must not be sent to `url`, or ""."""
    try:
        u = urlsplit(url)
        host = u.hostname or ""
        u.port  # noqa: B018  (raises ValueError for a bad port)
    except ValueError:
        return f"{what} {url} is not a URL"
    if not host:
        return f"{what} {url} has no host"
    if u.scheme == "https":
        return ""
    if u.scheme == "http" and is_loopback(host):
        return ""
    if u.scheme == "http":
        return (f"{what} {url} is plain http:// to {host}, which is not a loopback "
                "address: signed requests and bearer tokens would travel in clear; use "
                "https:// (plain http is allowed only to 127.0.0.1, ::1 or localhost)")
    return f"{what} {url}: the scheme must be https:// (or http:// to a loopback address)"


def checked(url: str | None, what: str) -> str | None:
    """`url` when credentials may be sent to it (a pydantic validator: ValueError saying
    why not)."""
    why = problem(url, what) if url is not None else ""
    if why:
        raise ValueError(why)
    return url


def is_own(url: str, own_hosts: tuple[str, ...]) -> bool:
    """`url` is a provider's own public API, one of `own_hosts` (a leading '.' is a
    suffix): not worth a line in the plan's header."""
    try:
        u = urlsplit(url)
    except ValueError:
        return False
    host = (u.hostname or "").lower()
    return u.scheme == "https" and any(host == o or (o.startswith(".") and host.endswith(o))
                                       for o in own_hosts)
