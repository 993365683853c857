"""`apt_sources` in the inventory: a third-party apt repository as data (pure).

Each source becomes a deb822 file `/etc/apt/sources.list.d/provision-NAME.sources` whose
`Signed-By:` names `/etc/apt/keyrings/provision-NAME.asc`, the armored key given here. The
key is pinned by its fingerprint: the host refuses a key whose primary fingerprint is not
the pinned one before it is installed (`provision.steps.apt_script`). Every field is text
that lands in a file apt parses, so each is checked as strictly as a name or a path.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from provision.text import printable, unsafe

from .fields import Url

_SUITE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~/-]{0,99}$|^/$")
_COMPONENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
_FINGERPRINT = re.compile(r"^[0-9A-F]{40}$")
_ARMOR_LINE = re.compile(r"^[A-Za-z0-9+/=]*$")
_HEADER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*: [\x20-\x7e]*$")
BEGIN = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
END = "-----END PGP PUBLIC KEY BLOCK-----"


def check_suite(value: str) -> str:
    """A suite (`jammy`, `stable`) or a flat repository's path (`/`, `./`)."""
    if not _SUITE.match(value) or ".." in value.split("/"):
        raise ValueError(f"invalid suite {printable(value)!r} (letters, digits and . _ + ~ / -, "
                         "starting with a letter or digit, or '/' for a flat repository)")
    return value


def check_component(value: str) -> str:
    if not _COMPONENT.match(value):
        raise ValueError(f"invalid component {printable(value)!r} (letters, digits and . _ + -, "
                         "starting with a letter or digit, e.g. main, stable, contrib)")
    return value


def check_fingerprint(value: str) -> str:
    """A v4 OpenPGP fingerprint: 40 hex digits (spaces between groups allowed, as gpg prints)."""
    compact = value.replace(" ", "").upper()
    if not _FINGERPRINT.match(compact):
        raise ValueError(f"invalid fingerprint {printable(value)!r} (40 hex digits, as "
                         "`gpg --show-keys --with-colons KEYFILE` prints on its fpr line)")
    return compact


def check_armored_key(value: str) -> str:
    """An ASCII-armored OpenPGP public key block, nothing before or after it."""
    lines = value.strip("\n").split("\n")
    bad = next((c for line in lines if (c := unsafe(line))), None)
    if bad:
        raise ValueError(f"the key must be printable text (found {printable(bad)!r})")
    if len(lines) < 3 or lines[0] != BEGIN or lines[-1] != END:
        raise ValueError(f"the key must be one ASCII-armored public key block: '{BEGIN}' ... "
                         f"'{END}' (export it with `gpg --armor --export FINGERPRINT`)")
    body = lines[1:-1]
    while body and _HEADER.match(body[0]):  # armor headers (Comment: ...) before a blank line
        body = body[1:]
    for line in body:
        if not _ARMOR_LINE.match(line.strip()):
            raise ValueError(f"the key's armored data has a line that is not base64: "
                             f"{printable(line[:40])!r}")
    return "\n".join(lines) + "\n"


Suite = Annotated[str, AfterValidator(check_suite)]
Component = Annotated[str, AfterValidator(check_component)]
Fingerprint = Annotated[str, AfterValidator(check_fingerprint)]
ArmoredKey = Annotated[str, AfterValidator(check_armored_key)]
AptUri = Url

SOURCES_DIR = "/etc/apt/sources.list.d"
KEYRINGS_DIR = "/etc/apt/keyrings"
PREFIX = "provision-"  # our files in both directories; others' are never touched


def source_path(name: str) -> str:
    return f"{SOURCES_DIR}/{PREFIX}{name}.sources"


def key_path(name: str) -> str:
    return f"{KEYRINGS_DIR}/{PREFIX}{name}.asc"


Suites = Annotated[list[Suite], Field(min_length=1)]
Components = list[Component]
