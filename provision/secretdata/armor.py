"""An age file in its ASCII armor, read as far as its text shows: the header's recipient
stanzas (pure, no key needed).

age's header (age-encryption.org/v1) is a line `age-encryption.org/v1`, then one stanza
per recipient (`-> TYPE ARGS...` and a base64 body), then `--- MAC`. An ssh-ed25519 or
ssh-rsa stanza's first argument is the recipient's key tag: the first 4 bytes of the
SHA-256 of the SSH public key's wire form, unpadded base64 (checked against age 1.1).
So `secrets check` tells who a secret is for without any private key.
"""

from __future__ import annotations

import base64
import binascii
import re

from provision.frozen import frozen

BEGIN = "-----BEGIN AGE ENCRYPTED FILE-----"
END = "-----END AGE ENCRYPTED FILE-----"
VERSION = b"age-encryption.org/v1"
MAX_ARMORED = 64 * 1024  # a secret is a token or a small file, not a dataset
_B64_LINE = re.compile(r"^[A-Za-z0-9+/]{1,64}={0,2}$")
_ARG = re.compile(rb"^[\x21-\x7e]+$")


class ArmorError(ValueError):
    """The text is not an armored age file (the message says what is wrong)."""


@frozen
class Stanza:
    type: str  # ssh-ed25519, ssh-rsa, X25519, scrypt, or another (plugin, grease)
    args: tuple[str, ...]

    @property
    def tag(self) -> str | None:
        """The SSH recipient's key tag (None for other stanzas)."""
        return self.args[0] if self.type in ("ssh-ed25519", "ssh-rsa") and self.args else None


@frozen
class Header:
    stanzas: tuple[Stanza, ...]

    @property
    def tags(self) -> frozenset[str]:
        return frozenset(t for s in self.stanzas if (t := s.tag) is not None)


def unarmor(text: str) -> bytes:
    """The binary age file inside `text` (the armor, as age writes it). Raises ArmorError."""
    if len(text) > MAX_ARMORED:
        raise ArmorError(f"it is too long ({len(text):,} characters; at most {MAX_ARMORED:,})")
    lines = text.strip().split("\n")
    if not lines or lines[0].strip() != BEGIN:
        raise ArmorError(f"it does not start with '{BEGIN}' (write the output of `age -a` or "
                         "`provision secrets set`, as a YAML block scalar `|`)")
    if lines[-1].strip() != END:
        raise ArmorError(f"it does not end with '{END}' (cut short?)")
    body = [ln.strip() for ln in lines[1:-1]]
    if not body:
        raise ArmorError("it holds no data between its BEGIN and END lines")
    for i, ln in enumerate(body):
        if not _B64_LINE.match(ln) or (i < len(body) - 1 and len(ln) != 64):
            raise ArmorError(f"line {i + 2} of the armor is not base64 in lines of 64 "
                             "characters (edited by hand?)")
    try:
        return base64.b64decode("".join(body), validate=True)
    except (binascii.Error, ValueError):
        raise ArmorError("its base64 does not decode (edited by hand?)") from None


def header(data: bytes) -> Header:
    """The recipient stanzas of a binary age file. Raises ArmorError."""
    if not data.startswith(VERSION + b"\n"):
        raise ArmorError("it is not an age v1 file (its header does not begin "
                         "'age-encryption.org/v1')")
    lines = data.split(b"\n")
    stanzas: list[Stanza] = []
    i = 1
    while i < len(lines):
        line = lines[i]
        if line.startswith(b"--- "):
            if not stanzas:
                raise ArmorError("its header names no recipient")
            return Header(tuple(stanzas))
        if not line.startswith(b"-> "):
            raise ArmorError("its header is malformed (a stanza line does not start '-> ')")
        parts = line[3:].split(b" ")
        if not parts or not all(_ARG.match(p) for p in parts):
            raise ArmorError("its header is malformed (a stanza has an empty or binary argument)")
        i += 1
        while i < len(lines) and len(lines[i]) == 64:  # the body: full lines, then a short one
            i += 1
        i += 1
        stanzas.append(Stanza(parts[0].decode(), tuple(p.decode() for p in parts[1:])))
    raise ArmorError("its header has no MAC line ('--- ...'): cut short?")


def read(text: str) -> Header:
    """The header of an armored age file. Raises ArmorError."""
    return header(unarmor(text))
