"""`provision check` for the DNS providers' local files: TSIG keys, credentials, API keys.

I/O: reads the files the inventory names on the operator's machine (nothing over the
network). A file that is there but unusable (an algorithm typo, a broken secret, a
credentials file whose token_uri is plain http) is bad input; a file that is not on
this machine is only a warning (`check` also runs where the keys are not, e.g. in CI).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from provision.dnsdata import endpoint
from provision.dnsdata.provider_settings import FileKind
from provision.frozen import frozen
from provision.inventory.model import Inventory
from provision.localfile import read_regular
from provision.text import printable

from . import tsig


@frozen
class FileProblem:
    field: str          # the inventory field path (dotted), for file:line
    path: str
    message: str
    missing: bool       # the file is not on this machine (a warning, not an error)


def problems(inv: Inventory) -> list[FileProblem]:
    """Every file a zone's provider settings name (`ProviderSettings.local_files`), read."""
    out: list[FileProblem] = []
    for z in inv.dns.zones if inv.dns else ():
        for fieldname, kind in z.settings.local_files.items():
            path = getattr(z.settings, fieldname)
            if isinstance(path, str):
                out += _CHECKS[kind](f"dns.zones.{z.name}.{fieldname}", path)
    return out


def _read(field: str, path: str, what: str, limit: int) -> tuple[bytes | None, list[FileProblem]]:
    try:
        return read_regular(path, limit, what, follow=True), []
    except FileNotFoundError:
        return None, [FileProblem(field, path, f"the {what} {path} is not on this machine",
                                  True)]
    except OSError as e:
        return None, [FileProblem(field, path, f"cannot read the {what} {path}: "
                                  f"{e.strerror or e}", False)]


def _tsig(field: str, path: str) -> list[FileProblem]:
    data, found = _read(field, path, "TSIG key file", tsig.MAX_BYTES)
    if data is None:
        return found
    try:
        tsig.parse(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        return [FileProblem(field, path, f"{path}: not UTF-8 text (byte {e.start})", False)]
    except tsig.TsigKeyError as e:
        return [FileProblem(field, path, f"{path}: {e}", False)]
    return []


def _credentials(field: str, path: str) -> list[FileProblem]:
    data, found = _read(field, path, "credentials file", 1024 * 1024)
    if data is None:
        return found
    try:
        info = json.loads(data.decode("utf-8"))  # not bytes: those may be UTF-16/32
    except (ValueError, RecursionError):
        return [FileProblem(field, path, f"{path}: not a JSON service-account key", False)]
    why = service_account_problem(info, path)
    return [FileProblem(field, path, why, False)] if why else []


def _secret(field: str, path: str) -> list[FileProblem]:
    data, found = _read(field, path, "key file", MAX_SECRET)
    if data is None:
        return found
    why = secret_problem(data, path)
    return [FileProblem(field, path, why, False)] if why else []


MAX_SECRET = 4096


def secret_problem(data: bytes, path: str) -> str:
    """Why `data` (an API key file's bytes) is not one key on one line, or "". Pure:
    shared by `check` and the provider that sends it (before any request)."""
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        return f"{path}: an API key is ASCII text"
    if not text:
        return f"{path}: the file is empty (it should hold the API key)"
    if any(not c.isprintable() or c.isspace() for c in text):
        return f"{path}: an API key is one line without spaces or control characters"
    return ""


_CHECKS: dict[FileKind, Callable[[str, str], list[FileProblem]]] = {
    "tsig": _tsig, "service-account": _credentials, "secret": _secret}


# The fields google-auth needs to sign a token request; without them it fails later, as an
# API failure (exit 1), with a message about its own internals.
_SERVICE_ACCOUNT_FIELDS = ("client_email", "private_key", "token_uri")


def service_account_problem(info: object, path: str) -> str:
    """Why `info` (a parsed credentials file) is not a usable service-account key, or "".
    Pure: shared by `check` (offline) and the Cloud DNS provider (before any request)."""
    if not isinstance(info, dict):
        return f"{path}: not a JSON service-account key (a JSON object, as the console writes it)"
    if info.get("type") != "service_account":
        kind = info.get("type")
        shown = f"'{printable(kind[:40])}'" if isinstance(kind, str) else "missing"
        return (f"{path}: the type is {shown}; credentials_file must be a service-account "
                'key ("type": "service_account", as `gcloud iam service-accounts keys '
                "create` writes it)")
    absent = [k for k in _SERVICE_ACCOUNT_FIELDS if not isinstance(info.get(k), str) or not info[k]]
    if absent:
        return (f"{path}: a service-account key needs the text fields "
                f"{', '.join(_SERVICE_ACCOUNT_FIELDS)}; missing or not text: {', '.join(absent)}")
    return endpoint.problem(info["token_uri"], f"the token_uri of {path}")
