"""The ACME account key and URL, in the operator's private state directory.

I/O (local files). `<state>/acme/<CA>/account.key` (PEM, EC P-256) and `account.url`,
one directory per CA directory URL. The key signs every request of the account: it is
made 0600 in a private directory (`provision.state`), and one found readable by anyone
else, or not ours, is refused as the DNS journals are.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from provision import state
from provision.localfile import read_regular

KEY_LIMIT = 16384


def directory_for(directory_url: str) -> Path:
    """The state directory of one CA: its host and a digest of its directory URL."""
    host = re.sub(r"[^A-Za-z0-9.-]+", "_", urlsplit(directory_url).netloc)[:80]
    digest = hashlib.sha256(directory_url.encode()).hexdigest()[:12]
    return state.root() / "acme" / f"{host}-{digest}"


def _read_private(path: Path, what: str) -> bytes:
    try:
        data = read_regular(path, KEY_LIMIT, what)
        st = os.lstat(path)
    except OSError as e:
        raise state.StateDirError(f"{path}: {e.strerror or e}") from None
    if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077:
        raise state.StateDirError(
            f"{path} is not private (mode {stat.S_IMODE(st.st_mode):o}, uid {st.st_uid}): "
            f"the ACME account key signs every request of the account; chmod 600 {path} "
            "if it is yours")
    return data


def load_key(directory_url: str) -> bytes:
    """The account key's PEM, made (EC P-256, 0600) when there is none."""
    d = state.private_dir(directory_for(directory_url))
    path = d / "account.key"
    if os.path.lexists(path):
        return _read_private(path, "ACME account key")
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    state.atomic_write(path, pem, 0o600)
    return pem


def load_url(directory_url: str) -> str | None:
    d = directory_for(directory_url)
    path = d / "account.url"
    if not state.existing(d) or not os.path.lexists(path):
        return None
    url = _read_private(path, "ACME account URL").decode("ascii", "replace").strip()
    return url if re.match(r"^https?://\S+$", url) else None


def save_url(directory_url: str, url: str) -> None:
    d = state.private_dir(directory_for(directory_url))
    state.atomic_write(d / "account.url", url + "\n", 0o600)


def forget_url(directory_url: str) -> None:
    """The CA no longer knows the remembered account (a test CA restarted, an account
    removed): the next registration makes or finds one for the same key."""
    d = directory_for(directory_url)
    if state.existing(d):
        (d / "account.url").unlink(missing_ok=True)
