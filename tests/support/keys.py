"""SSH keys for tests, made in-process (paramiko cannot generate Ed25519 keys; ssh-keygen
would be a subprocess, and the pure test folders start none)."""

from __future__ import annotations

import io

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def ed25519() -> paramiko.PKey:
    """A fresh Ed25519 key."""
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption()).decode()
    return paramiko.Ed25519Key.from_private_key(io.StringIO(pem))
