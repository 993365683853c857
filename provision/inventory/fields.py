"""Field types that refuse anything that could inject into a rendered file or a shell.

Every value that reaches a template or a remote command passes through one of these.
Each error says what is allowed, because that is what the user needs to fix it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import ipaddress
import re
from typing import Annotated

from pydantic import AfterValidator, Field, StrictInt

from provision.text import printable, unsafe

_SPACE = re.compile(r"\s")


def _no_control(value: str, what: str) -> str:
    bad = unsafe(value) or (m.group() if (m := _SPACE.search(value)) else None)
    if bad:
        raise ValueError(f"{what} must not contain whitespace or control characters "
                         f"(found {printable(bad)!r})")
    if not value:
        raise ValueError(f"{what} must not be empty")
    return value


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def check_name(value: str) -> str:
    """Host, bastion, role and service names: they become ssh Host patterns and file names."""
    _no_control(value, "a name")
    if not _NAME.match(value) or value in (".", ".."):
        raise ValueError(f"invalid name {value!r} (letters, digits, '.', '_', '-'; "
                         "starting with a letter or digit; at most 63 characters)")
    return value


# What `ssh` and the resolver would read as an address: 127, 0x7f000001, 017700000001.
_NUMERIC = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$", re.IGNORECASE)


def check_node_name(value: str) -> str:
    """Bastion and host names. Each becomes a `Host NAME` block in the ssh_config that
    `provision ssh-config --write` installs at the top of the operator's ~/.ssh/config, so
    a name must not be one the operator also uses for something else: a name with a dot
    (github.com, gpu1.example.org), one that reads as an address (127, 0x7f000001) or
    `localhost` would change how `ssh NAME` (and git, rsync, scp) behave for that name."""
    check_name(value)
    if "." in value:
        raise ValueError(f"a bastion or host name must not contain '.' ({value!r} could be a "
                         "domain the operator's own ssh, git or rsync connects to, and the "
                         "installed ssh_config would take it over); use one label such as "
                         f"{value.split('.')[0]!r} and put the domain in `address`")
    if _NUMERIC.match(value) or value.lower() == "localhost":
        raise ValueError(f"a bastion or host name must not read as an address ({value!r} is "
                         "what `ssh` would connect to on its own); use a name with a letter, "
                         "not only digits, and put the address in `address`")
    return value


_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


def check_user(value: str) -> str:
    """POSIX login names as useradd accepts them."""
    _no_control(value, "a user name")
    if not _USER.match(value):
        raise ValueError(f"invalid user name {value!r} (lowercase letters, digits, '_', '-'; "
                         "starting with a letter or '_'; at most 32 characters)")
    return value


_LABEL = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)$")


def is_hostname(value: str) -> bool:
    name = value[:-1] if value.endswith(".") else value
    return bool(name) and len(name) <= 253 and all(_LABEL.match(x) for x in name.split("."))


def check_address(value: str) -> str:
    """An IPv4/IPv6 literal or a DNS host name."""
    _no_control(value, "an address")
    if "%" in value:
        raise ValueError(f"invalid address {value!r} (IPv6 scope ids like %eth0 are not allowed)")
    if _IP_TEXT.match(value):
        try:
            ipaddress.ip_address(value)
            return value
        except ValueError:
            pass
    if not is_hostname(value) or value.replace(".", "").isdigit():
        raise ValueError(f"invalid address {value!r} (an IPv4 or IPv6 address, or a DNS name "
                         "of letters, digits and '-')")
    return value


def is_ip(value: str) -> bool:
    if not _IP_TEXT.match(value):
        return False
    try:
        ipaddress.ip_address(value)
        return True
    except ValueError:
        return False


def is_cidr(value: str) -> bool:
    if not _CIDR_TEXT.match(value):
        return False
    try:
        ipaddress.ip_network(value)
        return True
    except ValueError:
        return False


# The text of an address or network, before any parse: hex digits, dots, colons and a
# prefix length. ipaddress accepts IPv6 scope ids (`fe80::1%<anything but space>`) and keeps
# them in str(); we accept none, so quotes, commas and `$( )` never ride along.
_IP_TEXT = re.compile(r"^[0-9A-Fa-f:.]+$")
_CIDR_TEXT = re.compile(r"^[0-9A-Fa-f:.]+(/[0-9]{1,3})?$")


def _ip_text(value: str, what: str, pattern: re.Pattern[str]) -> None:
    if "%" in value:
        raise ValueError(f"invalid {what} {value!r} (IPv6 scope ids like %eth0 are not allowed)")
    if not pattern.match(value):
        raise ValueError(f"invalid {what} {value!r} (digits, hex letters, '.', ':'"
                         + (" and one '/prefix'" if pattern is _CIDR_TEXT else "") + " only)")


def check_ip(value: str) -> str:
    """An IP literal (bind addresses)."""
    _no_control(value, "an IP address")
    _ip_text(value, "IP address", _IP_TEXT)
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise ValueError(f"invalid IP address {value!r} (e.g. 127.0.0.1, 0.0.0.0, ::1, ::)") from None


def check_cidr(value: str) -> str:
    """A network in CIDR notation (a bare address means a single host)."""
    _no_control(value, "a CIDR")
    _ip_text(value, "CIDR", _CIDR_TEXT)
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as e:
        hint = ""
        with contextlib.suppress(ValueError):
            hint = f"; did you mean {ipaddress.ip_network(value, strict=False)}?"
        raise ValueError(f"invalid CIDR {value!r} ({e}{hint})") from None


_PATH = re.compile(r"^[A-Za-z0-9._/~+@:,=-]+$")


def check_path(value: str) -> str:
    """A file path: absolute, ~-relative or relative; no spaces, quotes or shell characters."""
    _no_control(value, "a path")
    if not _PATH.match(value):
        raise ValueError(f"invalid path {value!r} (letters, digits and . _ / ~ + @ : , = - only)")
    return value


def check_known_hosts_path(value: str) -> str:
    """`defaults.known_hosts`: provision appends host keys to it (accept-new), so it must
    name a known_hosts file, never authorized_keys, a shell rc file or a key. The file
    name says so (`known_hosts`, `known_hosts2`, `fleet_known_hosts`, `known_hosts.lab`);
    what is in it is checked again before anything is appended (provision.ssh.hostkeys)."""
    check_path(value)
    base = value.rstrip("/").rsplit("/", 1)[-1]
    if "known_hosts" not in base or value.endswith("/"):
        raise ValueError(f"{value!r} is not a known_hosts file: provision appends host keys to "
                         "this file, so its name must contain 'known_hosts' (for example "
                         "~/.ssh/known_hosts or ~/.ssh/fleet_known_hosts)")
    return value


def check_abs_path(value: str) -> str:
    check_path(value)
    parts = value.split("/")
    if not value.startswith("/") or ".." in parts or "." in parts or "//" in value:
        raise ValueError(f"invalid path {value!r} (an absolute path on the host, without "
                         "'.', '..' or '//')")
    return value


# Where a service's data directories (created and given to the service's user) may be.
DATA_ROOTS = ("/srv/", "/data/", "/mnt/", "/scratch/", "/home/", "/opt/")


def check_data_dir(value: str) -> str:
    """A directory created and chowned for a service user: only under the data roots, never
    a root itself (/home/NAME and /opt/NAME must have a level below them)."""
    check_abs_path(value)
    path = value.rstrip("/")
    root = next((r for r in DATA_ROOTS if path.startswith(r)), None)
    depth = 3 if root in ("/home/", "/opt/") else 2
    if root is None or len(path.split("/")) <= depth:
        raise ValueError(f"data directory {value!r} must be below /srv, /data, /mnt, /scratch, "
                         "/home/<user> or /opt/<name> (it is created for the service's user; "
                         "anywhere else it could hand them a system directory)")
    return value


KEY_TYPES = {
    "ssh-ed25519": "ssh-ed25519",
    "ssh-rsa": "ssh-rsa",
    "ecdsa-sha2-nistp256": "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384": "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521": "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com": "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com": "sk-ecdsa-sha2-nistp256@openssh.com",
}
_COMMENT = re.compile(r"^[\x20-\x7e]*$")


def check_public_key(value: str) -> str:
    """An OpenSSH public key line: type, base64 blob whose embedded type matches, optional comment."""
    if "\n" in value or "\r" in value or "\x00" in value:
        raise ValueError("a public key must be a single line")
    parts = value.strip().split(None, 2)
    allowed = "ssh-ed25519, ecdsa-sha2-nistp256/384/521, ssh-rsa, sk-ssh-ed25519@openssh.com"
    if len(parts) < 2:
        raise ValueError(f"not an OpenSSH public key (expected 'TYPE BASE64 [comment]', TYPE one of {allowed})")
    kind, blob = parts[0], parts[1]
    if kind not in KEY_TYPES:
        raise ValueError(f"key type {kind!r} is not allowed ({allowed}; never ssh-dss, no options)")
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("key data is not valid base64") from None
    n = int.from_bytes(raw[:4], "big") if len(raw) >= 4 else -1
    if n < 0 or raw[4 : 4 + n].decode("ascii", "replace") != kind:
        raise ValueError(f"key data does not hold a {kind} key (corrupted or mismatched type)")
    if len(parts) == 3 and not _COMMENT.match(parts[2]):
        raise ValueError("key comment must be printable ASCII")
    return " ".join(parts)


_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]{1,127}$")


def check_package(value: str) -> str:
    _no_control(value, "a package name")
    if not _PACKAGE.match(value):
        raise ValueError(f"invalid package name {value!r} (Debian package names: lowercase "
                         "letters, digits, '+', '-', '.')")
    return value


def check_command(value: str) -> str:
    """A service command line: one line of printable text, placeholders {bind} {port} only."""
    bad = unsafe(value)
    if bad:
        raise ValueError(f"a command must be one line without control or direction-changing "
                         f"characters (found {printable(bad)!r})")
    if not value.strip():
        raise ValueError("a command must not be empty")
    for field in re.findall(r"\{([^{}]*)\}", value):
        if field not in PLACEHOLDERS:
            raise ValueError(f"unknown placeholder {{{field}}} in command "
                             f"(allowed: {', '.join('{' + p + '}' for p in sorted(PLACEHOLDERS))})")
    for char, why in (("%", "systemd expands %-specifiers"), ("$", "systemd expands $VARIABLES"),
                      ("\\", "systemd interprets backslash escapes"),
                      ('"', "systemd groups quoted words"), ("'", "systemd groups quoted words")):
        if char in value:
            raise ValueError(f"'{char}' is not allowed in a command ({why} in unit files; "
                             "put complex command lines in a script and run that)")
    first = re.sub(r"^(\{venv\})+", "", value.lstrip())[:1]  # {venv} may be empty
    if first in ("+", "!", "@", "-", ":"):
        raise ValueError(f"a command must not start with {first!r} (systemd reads + ! !! @ - : "
                         "as prefixes that change privileges or how it runs the command)")
    if ";" in value.split():
        raise ValueError("a lone ';' is not allowed in a command (systemd starts another "
                         "command there)")
    return value


PLACEHOLDERS = {"bind", "port", "logdir", "notebook_dir", "config", "user", "venv"}


def check_zone(value: str) -> str:
    _no_control(value, "a zone name")
    name = value.rstrip(".")
    if not is_hostname(name):
        raise ValueError(f"invalid zone name {value!r} (a DNS name such as example.org)")
    return name.lower()


def check_record_name(value: str) -> str:
    _no_control(value, "a record name")
    if value in ("@", "*"):  # '*': the wildcard right below the apex (*.zone), as `dns check *` reads it
        return value
    if value.startswith("*."):
        rest = value[2:]
        if is_hostname(rest) and not rest.endswith("."):
            return value.lower()
    if not is_hostname(value) or value.endswith("."):
        raise ValueError(f"invalid record name {value!r} (a name relative to the zone, e.g. "
                         "'api' or 'a.b', '*.x', or '@' for the apex)")
    return value.lower()


def check_hostname_target(value: str) -> str:
    _no_control(value, "a CNAME target")
    if not is_hostname(value):
        raise ValueError(f"invalid CNAME target {value!r} (a DNS name such as lb-1.example.net)")
    return value.rstrip(".").lower()


def check_url(value: str) -> str:
    _no_control(value, "a URL")
    if not re.match(r"^https?://[A-Za-z0-9.\[\]:_-]+(/[A-Za-z0-9._~/-]*)?$", value):
        raise ValueError(f"invalid URL {value!r} (http:// or https:// followed by a host[:port])")
    return value


def parse_port(text: str, what: str) -> int:
    """A port written on the command line: ASCII digits, 1-65535. Python's int() also
    reads other scripts' digits ('８０００', '٨٠٠٠') and str.isdigit() accepts '²', which
    int() then refuses (a traceback): ValueError saying what is allowed."""
    if not text.isascii() or not text.isdigit():
        shown = printable(text)
        also = ("; it is written with digits other than 0-9" if text and not text.isascii()
                and all(c.isdigit() for c in text) else "")
        raise ValueError(f"{what}: {shown!r} is not a port (1-65535, written with the digits "
                         f"0-9){also}")
    port = int(text)
    if not 1 <= port <= 65535:
        raise ValueError(f"{what}: {port} is out of range (a port is 1-65535)")
    return port


Name = Annotated[str, AfterValidator(check_name)]
NodeName = Annotated[str, AfterValidator(check_node_name)]
User = Annotated[str, AfterValidator(check_user)]
Address = Annotated[str, AfterValidator(check_address)]
IP = Annotated[str, AfterValidator(check_ip)]
Cidr = Annotated[str, AfterValidator(check_cidr)]
FilePath = Annotated[str, AfterValidator(check_path)]
KnownHostsPath = Annotated[str, AfterValidator(check_known_hosts_path)]
AbsPath = Annotated[str, AfterValidator(check_abs_path)]
DataDir = Annotated[str, AfterValidator(check_data_dir)]
PublicKey = Annotated[str, AfterValidator(check_public_key)]
Package = Annotated[str, AfterValidator(check_package)]
Command = Annotated[str, AfterValidator(check_command)]
ZoneName = Annotated[str, AfterValidator(check_zone)]
RecordName = Annotated[str, AfterValidator(check_record_name)]
Target = Annotated[str, AfterValidator(check_hostname_target)]
Url = Annotated[str, AfterValidator(check_url)]
Port = Annotated[StrictInt, Field(ge=1, le=65535)]
Ttl = Annotated[StrictInt, Field(ge=1, le=604800)]
Seconds = Annotated[StrictInt, Field(ge=1, le=3600)]
