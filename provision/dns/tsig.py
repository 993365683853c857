"""TSIG key files as BIND and `tsig-keygen` write them, parsed and checked. Pure, but for
`read_tsig_key`, which reads one key file (and checks where it lies) before parsing it.

Used by the rfc2136 provider (before anything is sent) and by `provision check`
(offline), so a typo in the algorithm or a broken secret is an error at check time,
in words, with what is allowed.
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path

from provision.dnsdata.secrets import read_bound
from provision.errors import UsageError
from provision.localfile import read_regular
from provision.text import printable

# The algorithm names BIND (named.conf, `tsig-keygen -a`, nsupdate -y) writes, and the
# name dnspython signs with: HMAC-MD5 has a long historic name on the wire (RFC 8945).
ALGORITHMS = {
    "hmac-md5": "HMAC-MD5.SIG-ALG.REG.INT",
    "hmac-sha1": "hmac-sha1",
    "hmac-sha224": "hmac-sha224",
    "hmac-sha256": "hmac-sha256",
    "hmac-sha384": "hmac-sha384",
    "hmac-sha512": "hmac-sha512",
}
_ALIASES = {"hmac-md5.sig-alg.reg.int": "hmac-md5"}

_KEY = re.compile(r'key\s+"?([A-Za-z0-9._-]+)"?\s*\{(.*?)\}\s*;', re.S)
_ALG = re.compile(r"algorithm\s+\"?([A-Za-z0-9.-]+)\"?\s*;")
# Any secret statement is found (quoted or not, any text); secret_ok then says what is
# wrong with its value, rather than claiming there is no secret line.
_SECRET = re.compile(r'secret\s+"?([^";\s]*)"?\s*;')
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,63}(\.[A-Za-z0-9_-]{1,63})*\.?$")
MAX_BYTES = 64 * 1024


class TsigKeyError(ValueError):
    """A key file provision cannot use; the message says why and what is allowed."""


def parse(text: str) -> tuple[str, str, str]:
    """(key name, BIND algorithm name, base64 secret) from a BIND ``key`` block or a
    one-line ``algorithm:name:secret`` (nsupdate -y)."""
    m = _KEY.search(text)
    if m and len(_KEY.findall(text)) > 1:
        # which one would sign is not for provision to guess
        raise TsigKeyError("the file holds more than one key block; a TSIG key file holds "
                           "one key (as tsig-keygen writes it)")
    if m:
        alg, secret = _ALG.search(m.group(2)), _SECRET.search(m.group(2))
        if not alg:
            raise TsigKeyError(f"the key block '{m.group(1)}' has no `algorithm NAME;` line")
        if not secret:
            raise TsigKeyError(f"the key block '{m.group(1)}' has no `secret \"BASE64\";` line")
        name, algorithm, secret_text = m.group(1), alg.group(1), secret.group(1)
    else:
        parts = text.strip().split(":")
        if len(parts) != 3 or not all(parts):
            raise TsigKeyError("not a TSIG key (expected a BIND `key \"name\" { algorithm ...; "
                            "secret \"...\"; };` block, as tsig-keygen writes it, or "
                            "algorithm:name:secret)")
        algorithm, name, secret_text = parts
    return name_ok(name), algorithm_ok(algorithm), secret_ok(secret_text)


def algorithm_ok(text: str) -> str:
    a = text.strip().lower()
    a = _ALIASES.get(a, a)
    if a not in ALGORITHMS:
        raise TsigKeyError(f"unknown TSIG algorithm '{printable(text[:40])}' (allowed: "
                        f"{', '.join(ALGORITHMS)}, as tsig-keygen -a writes them)")
    return a


def name_ok(text: str) -> str:
    if not _NAME.match(text) or len(text) > 253:
        raise TsigKeyError(f"the key name '{printable(text[:80])}' is not a DNS name (letters, "
                        "digits, '-', '_' in dot-separated labels)")
    return text


def secret_ok(text: str) -> str:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise TsigKeyError("the secret is not base64 (tsig-keygen writes it so)") from None
    if not raw:
        raise TsigKeyError("the secret is empty")
    return text.strip()


def read_tsig_key(path: str, tree: str | None = None) -> tuple[str, str, str]:
    """(name, algorithm, secret) from a BIND key file (what `tsig-keygen` writes) or a
    one-line `algorithm:name:secret` (nsupdate -y). The algorithm is BIND's name
    (hmac-sha256 …); UsageError (bad input, exit 2) naming the file otherwise. `tree`: an
    inventory's tree, whose key files must lie there or in the config directory (checked
    again on the file opened); None for a key file given directly, not by an inventory."""
    try:
        if tree is None:
            data = read_regular(Path(path).expanduser(), MAX_BYTES, "TSIG key file",
                                follow=True)
        else:
            data = read_bound(path, MAX_BYTES, "TSIG key file", tree)
    except OSError as e:
        raise UsageError(f"cannot read the TSIG key file {path}: {e.strerror or e}") from None
    try:
        return parse(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text (byte {e.start}): not a TSIG key file") from None
    except TsigKeyError as e:
        raise UsageError(f"{path}: {e}") from None
