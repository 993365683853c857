"""What this machine last saw installed on each door (I/O: the private state directory).

`<state>/acme/installed/<host>/<name>.json`: the certificate's fingerprint and validity,
written by `certs renew` after it installed one or read one as current. `apply` reads it
to decide, without a remote command, whether a certificate may be due (a no-op apply
stays one remote command per host); `certs renew` and `audit` always read the host.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from provision import state

from .account import _read_private
from .renewal import Held


def _path(host: str, name: str) -> Path:
    return state.root() / "acme" / "installed" / host / f"{name}.json"


def save(host: str, name: str, fingerprint: str, held: Held) -> None:
    p = _path(host, name)
    state.private_dir(p.parent)
    state.atomic_write(p, json.dumps({
        "fingerprint": fingerprint, "not_before": held.not_before.isoformat(),
        "not_after": held.not_after.isoformat(), "names": list(held.names)}) + "\n")


def load(host: str, name: str) -> Held | None:
    """The certificate last seen for `name` on `host`; None when unknown or unreadable
    (then `apply` asks the host)."""
    p = _path(host, name)
    if not state.existing(p.parent) or not os.path.lexists(p):
        return None
    try:
        doc = json.loads(_read_private(p, "certificate record"))
        return Held(dt.datetime.fromisoformat(doc["not_before"]),
                    dt.datetime.fromisoformat(doc["not_after"]),
                    tuple(str(n) for n in doc["names"]))
    except (ValueError, KeyError, TypeError):
        return None


def fingerprint(host: str, name: str) -> str | None:
    """The SHA-256 fingerprint (lower-case hex) of the certificate last installed or seen for
    `name` on `host`; None when unknown."""
    p = _path(host, name)
    if not state.existing(p.parent) or not os.path.lexists(p):
        return None
    try:
        value = json.loads(_read_private(p, "certificate record"))["fingerprint"]
    except (ValueError, KeyError, TypeError):
        return None
    return value.replace(":", "").lower() if isinstance(value, str) else None
