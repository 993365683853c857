"""Where a service's secrets land on its host, and what the unit says of them (pure).

Each secret is a root-only file (0400) in /etc/provision/credentials/SERVICE/ (0700
root): `NAME.env` holding `VAR="value"` for an environment variable, named by the unit's
`EnvironmentFile=` (systemd reads it as root, before the service's user takes over: the
variable is then in the process's environment, which /proc shows to its own uid and root
only), or `NAME.cred` holding the bytes, handed in by `LoadCredential=` as
$CREDENTIALS_DIRECTORY/FILE (a ramfs only the service's user reads, systemd 250+).
The unit names paths only; neither the unit, `systemctl show`, the command line nor the
journal holds a value.
"""

from __future__ import annotations

import hashlib

from provision.errors import OperationError
from provision.frozen import frozen
from provision.inventory.model import SecretUse, Service
from provision.secretdata.vault import Sealed, Vault

ROOT = "/etc/provision/credentials"
SALT = f"{ROOT}/.salt"
MODE = 0o400
DIR_MODE = 0o700


def directory(service: Service) -> str:
    return f"{ROOT}/{service.name}"


def path(service: Service, use: SecretUse) -> str:
    return f"{directory(service)}/{use.secret}.{'env' if use.env else 'cred'}"


@frozen
class Delivery:
    """One secret file of a service, with its content (never printed: `Sealed`)."""

    service: str
    secret: str
    path: str
    content: Sealed


def _env_line(var: str, sealed: Sealed) -> bytes:
    """`VAR="value"` as systemd's EnvironmentFile= reads it: inside double quotes a
    backslash escapes `"`, `\\`, `` ` `` and `$`; everything else is taken as it is."""
    value = sealed.reveal()
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in text):
        raise OperationError(f"secret '{sealed.name}' cannot be the environment variable {var}: "
                             "its value is not one line of UTF-8 text (a newline, NUL or other "
                             "control character); give it to the service as a file: "
                             f"{{file: {sealed.name}}}")
    escaped = "".join("\\" + c if c in '"\\`$' else c for c in text)
    return f'{var}="{escaped}"\n'.encode()


def deliveries(service: Service, vault: Vault | None) -> tuple[Delivery, ...]:
    """The files `service`'s secrets need. Raises OperationError when the run has not
    decrypted them (only plan and apply do) or a value cannot be what it is for."""
    out = []
    for use in service.secrets:
        sealed = vault.get(use.secret) if vault is not None else None
        if sealed is None:
            raise OperationError(f"service {service.name} uses secret '{use.secret}', which this "
                                 "run has not decrypted (only plan and apply decrypt secrets)")
        data = _env_line(use.env, sealed) if use.env else sealed.reveal()
        out.append(Delivery(service.name, use.secret, path(service, use),
                            Sealed(use.secret, data)))
    return tuple(out)


def unit_lines(service: Service) -> tuple[tuple[str, str], ...]:
    """(setting, value) lines of the unit: paths only, never a value."""
    lines: list[tuple[str, str]] = []
    for use in service.secrets:
        p = path(service, use)
        lines.append(("EnvironmentFile", p) if use.env else ("LoadCredential", f"{use.file}:{p}"))
    return tuple(lines)


def fingerprint(salt: str, content: bytes) -> str:
    """What the host's probe reports for a file holding `content` (sha256(salt || content))."""
    return hashlib.sha256(salt.encode() + content).hexdigest()


def placeholder(service: Service, use: SecretUse) -> str:
    """What `render --out` writes in a secret's place."""
    return (f"# secret {use.secret} of service {service.name}: delivered by `provision apply` "
            "(root-only, 0400); never rendered\n")
