"""The door's files as text (pure): the HAProxy config of a host, each service's map of
key digests, the unit. Rendered from templates/door/ (docs/door.md#limits).

Rates become HAProxy's sliding counters: a rate of N per S seconds with a burst B (B
is at least N) is a counter over a window of B*S/N seconds that admits B requests; only
requests that pass count (a client that stops is served again one window later, which
is what Retry-After says).
"""

from __future__ import annotations

import hashlib
import json
import math

from provision.frozen import frozen
from provision.inventory.model import Host, Rate, Service
from provision.render.env import render

from . import paths

MAXCONN = 4096  # needs ~2 descriptors each (the unit raises LimitNOFILE)
# Mozilla's "intermediate" configuration (ssl-config.mozilla.org, guideline 5.7) without
# the DHE-RSA suites (no use to an ECDSA key)
CIPHERS = ":".join((
    "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305"))
CIPHERSUITES = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
DIGEST_LINE = "# provision-door-digest "


@frozen
class Counter:
    """One limit as HAProxy counts it."""

    limit: int  # requests admitted in a window
    window_ms: int
    retry: int  # seconds: Retry-After and RateLimit-Reset
    expire_ms: int  # a stick-table entry outlives its window
    body: str  # the 429's JSON


@frozen
class DoorView:
    service: str
    name: str
    port: int
    backend_port: int
    crt: str
    keys_map: str
    keyed: bool
    connections: int
    address: Counter
    key: Counter
    unauthorized: str


def _error(code: str, message: str) -> str:
    # single-quoted in the config: JSON of ASCII without a quote or backslash of its own
    text = json.dumps({"error": {"code": code, "message": message}}, separators=(",", ":"))
    assert "'" not in text and "\\" not in text, text
    return text


def counter(rate: Rate, burst: int | None, what: str) -> Counter:
    # the burst never lowers a limit: per_address 100/s beside per_key 2/s with burst 6
    # keeps its 100 a second
    limit = max(burst or 0, rate.count)
    window_ms = max(1, limit * rate.seconds * 1000 // rate.count)
    retry = max(1, math.ceil(window_ms / 1000))
    per = "second" if rate.seconds == 1 else "minute"
    return Counter(limit, window_ms, retry, max(2 * window_ms, 10_000),
                   _error("rate_limited", f"too many requests {what}: {rate.count} a {per} "
                                          f"(burst {limit}); retry after {retry} s"))


def view(s: Service) -> DoorView:
    h = s.https
    assert h is not None
    lim = h.limits
    return DoorView(
        service=s.name, name=h.name, port=h.port, backend_port=s.port,
        crt=paths.combined(h.name), keys_map=map_path(s), keyed=bool(h.keys),
        connections=lim.connections,
        address=counter(lim.per_address, lim.burst, "from this address"),
        key=counter(lim.per_key, lim.burst, "with this key"),
        unauthorized=_error("unauthorized", "a valid API key is required: Authorization: Bearer KEY"))


def doors(host: Host) -> tuple[Service, ...]:
    return tuple(s for s in host.services if s.https is not None)


def config(host: Host) -> str:
    """The host's HAProxy config; its digest line is the SHA-256 of the text rendered with
    an empty digest (what the door serves back to the host itself)."""
    data = dict(host=host.name, doors=[view(s) for s in doors(host)], maxconn=MAXCONN,
                ciphers=CIPHERS, ciphersuites=CIPHERSUITES)
    blank = render("door/haproxy.cfg.j2", digest="-", **data)
    return render("door/haproxy.cfg.j2", digest=digest_of(blank), **data)


def digest_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def config_digest(text: str) -> str | None:
    """The digest line of a rendered config, or None."""
    for line in text.splitlines()[:4]:
        if line.startswith(DIGEST_LINE):
            return line[len(DIGEST_LINE):].strip()
    return None


def map_path(s: Service) -> str:
    return paths.keys_map(s.name, digest_of(keys_map(s))[:16])


def keys_map(s: Service) -> str:
    """`DIGEST CLIENT` lines: only digests ever reach the host."""
    assert s.https is not None
    return render("door/keys.map.j2", service=s.name, keys=s.https.keys)


def unit() -> str:
    return render("door/provision-door.service.j2", config=paths.CONFIG,
                  socket=paths.MASTER_SOCKET)
