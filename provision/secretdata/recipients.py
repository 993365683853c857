"""Who a secret is encrypted to: the team's SSH keys and the inventory's extra
`recipients:` (pure).

age takes ssh-ed25519 keys and ssh-rsa keys of at least 2048 bits as recipients; ECDSA
and FIDO (sk-) keys it cannot encrypt to, so a member whose keys are all of those is
named as unable to receive a secret. Native age keys (`age1...`) are taken as extra
recipients: an ssh-agent-only member's way in (docs/secrets.md).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping, Sequence

from provision.frozen import frozen

AGE_KEY = re.compile(r"^age1[02-9ac-hj-np-z]{58}$")  # bech32, as age-keygen prints
RSA_MIN_BITS = 2048


@frozen
class Recipient:
    """One public key a secret is encrypted to, and whose it is."""

    owner: str  # a team member's name, or `recipients:`'s label
    key: str  # as age takes it: "ssh-ed25519 AAAA..." (no comment) or "age1..."
    tag: str | None  # the SSH key tag age writes in the header (None: an age1 key)
    member: bool  # a team member's key (else an extra recipient)


def _ssh_blob(key: str) -> tuple[str, bytes] | None:
    parts = key.split()
    if len(parts) < 2:
        return None
    try:
        return parts[0], base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        return None


def key_tag(key: str) -> str | None:
    """age's tag of an SSH public key: SHA-256 of its wire form, 4 bytes, unpadded base64."""
    parsed = _ssh_blob(key)
    if parsed is None:
        return None
    return base64.b64encode(hashlib.sha256(parsed[1]).digest()[:4]).decode().rstrip("=")


def _rsa_bits(blob: bytes) -> int:
    """The modulus size of an ssh-rsa key's wire form (0 when malformed)."""
    fields: list[bytes] = []
    i = 0
    while i + 4 <= len(blob) and len(fields) < 3:
        n = int.from_bytes(blob[i:i + 4], "big")
        fields.append(blob[i + 4:i + 4 + n])
        i += 4 + n
    return int.from_bytes(fields[2], "big").bit_length() if len(fields) == 3 else 0


def unusable(key: str) -> str | None:
    """Why age cannot encrypt to `key` (None when it can)."""
    if AGE_KEY.match(key):
        return None
    parsed = _ssh_blob(key)
    if parsed is None:
        return "not an OpenSSH public key or an age1 key"
    kind, blob = parsed
    if kind == "ssh-ed25519":
        return None
    if kind == "ssh-rsa":
        bits = _rsa_bits(blob)
        return None if bits >= RSA_MIN_BITS else f"an RSA key of {bits} bits (age needs >= {RSA_MIN_BITS})"
    return f"a {kind} key (age encrypts to ssh-ed25519 and ssh-rsa keys only)"


def _age_form(key: str) -> str:
    return key if AGE_KEY.match(key) else " ".join(key.split()[:2])


def recipients(team: Sequence[tuple[str, Sequence[str]]],
               extra: Mapping[str, str]) -> tuple[tuple[Recipient, ...], tuple[str, ...]]:
    """(every key a secret goes to, the members none of whose keys age can use)."""
    out: list[Recipient] = []
    unable: list[str] = []
    for name, keys in team:
        usable = [k for k in keys if unusable(k) is None]
        if not usable:
            unable.append(name)
        out += [Recipient(name, _age_form(k), key_tag(k), True) for k in usable]
    out += [Recipient(label, _age_form(k), None if AGE_KEY.match(k) else key_tag(k), False)
            for label, k in extra.items() if unusable(k) is None]
    return tuple(out), tuple(unable)
