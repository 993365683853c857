"""Pebble, Let's Encrypt's test CA, in the lab (issue 36): its config and the
certificate of its own listener (Debian's package ships none).

Pure apart from making keys. Pebble always gets `-config` (its default path is relative
to a source checkout) and `-dnsserver` (its DNS-01 validation asks the lab's BIND, not
the machine's resolver); `PEBBLE_VA_NOSLEEP=1` removes its artificial validation delays,
`PEBBLE_WFE_NONCEREJECT=0` its 5 % of refused nonces and `PEBBLE_AUTHZREUSE=0` its reuse
of half the authorizations, so every order validates a fresh challenge. Its management
port (15000: the CA's roots at /roots/0, and its keys) listens on loopback only.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

ACME_PORT = 14000
MANAGEMENT_PORT = 15000
ENV = {"PEBBLE_VA_NOSLEEP": "1", "PEBBLE_WFE_NONCEREJECT": "0", "PEBBLE_AUTHZREUSE": "0"}


def config(listen: str, management: str, cert: str, key: str,
           eab: dict[str, str] | None = None) -> dict[str, Any]:
    """Pebble's JSON config (`listen` and `management`: host:port)."""
    doc: dict[str, Any] = {
        "listenAddress": listen, "managementListenAddress": management,
        "certificate": cert, "privateKey": key, "httpPort": 5002, "tlsPort": 5001,
        "ocspResponderURL": "", "externalAccountBindingRequired": bool(eab)}
    if eab:
        doc["externalAccountMACKeys"] = eab
    return {"pebble": doc}


def command(config_path: str, dns_server: str) -> list[str]:
    return ["/usr/bin/pebble", "-config", config_path, "-dnsserver", dns_server]


def listener_certificate(addresses: list[str], days: int = 30) -> tuple[bytes, bytes, bytes]:
    """(root PEM, leaf certificate PEM, leaf key PEM): a one-off root and a certificate
    for Pebble's listener at `addresses` (IP addresses or names). The root is what an
    inventory's acme.ca_bundle names; its key is thrown away."""
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    root_key = ec.generate_private_key(ec.SECP256R1())
    root_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                              "provision lab: Pebble listener root")])
    root = (x509.CertificateBuilder().subject_name(root_name).issuer_name(root_name)
            .public_key(root_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                         False, False), critical=True)
            .sign(root_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for a in addresses:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(a)))
        except ValueError:
            sans.append(x509.DNSName(a))
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pebble")]))
            .issuer_name(root_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(root_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return (root.public_bytes(pem), leaf.public_bytes(pem),
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))
