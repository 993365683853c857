"""Where the door's files live on a host: the one place both the door and the
certificates (`provision certs`) name them (docs/door.md#files-on-the-host).

Every directory here is root's (0755 for the tree, 0700 where a private key lives):
root only ever acts by name inside directories no other account can change.
"""

from __future__ import annotations

# /etc/provision/tls/<name>/ per certificate name (the service's `https.name`)
TLS_ROOT = "/etc/provision/tls"
PRIVKEY = "privkey.pem"  # made on the host (openssl), root 0600, never leaves it
FULLCHAIN = "fullchain.pem"  # the certificate then its chain, 0644
COMBINED = "haproxy.pem"  # fullchain + privkey, what HAProxy's `crt` loads, root 0600
CSR = "request.csr"  # the signing request for the key, 0644 (read by `provision certs`)
SELF_SIGNED = "self-signed"  # present while fullchain.pem is the door's own placeholder

# The proxy: its own unit, config and key maps (never Debian's haproxy.service/.cfg)
DOOR_DIR = "/etc/provision/door"
CONFIG = f"{DOOR_DIR}/haproxy.cfg"  # root 0640, group haproxy
UNIT = "provision-door.service"
MASTER_SOCKET = "/run/provision-door/master.sock"


def tls_dir(name: str) -> str:
    """The directory of the certificate for `name` (an FQDN, already validated)."""
    return f"{TLS_ROOT}/{name}"


def privkey(name: str) -> str:
    return f"{tls_dir(name)}/{PRIVKEY}"


def fullchain(name: str) -> str:
    return f"{tls_dir(name)}/{FULLCHAIN}"


def combined(name: str) -> str:
    return f"{tls_dir(name)}/{COMBINED}"


def keys_map(service: str) -> str:
    """The map of SHA-256 key digests to client names of `service` (root 0640, group haproxy)."""
    return f"{DOOR_DIR}/{service}.keys"
