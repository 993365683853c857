"""What `provision certs` says to a host and how it reads the answer (pure).

The host makes its key and signing request itself (`templates/certs/read.sh.j2`); this
machine reads the CSR, has it signed, and sends back only the certificate chain
(`templates/certs/install.sh.j2`), which the host checks against its own key, installs
atomically (the full chain, and the combined file the door loads), reloads the door and
reads back what the door's port serves. Everything read from the host is checked here
before it drives anything: a CSR must be one for exactly the name asked, a chain must
parse.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes

from provision.door import paths
from provision.frozen import frozen
from provision.render.env import render
from provision.text import printable

from .renewal import Held

# How long the port may take to serve the new certificate after the reload: HAProxy's
# `systemctl reload` returns before its new worker holds the port, and on a loaded machine
# that took over 10 s. The read-back stops as soon as the port serves it.
READBACK_SECONDS = 60


class HostAnswerError(ValueError):
    """What the host printed is not what the script prints."""


@frozen
class OnHost:
    """What a host holds for one certificate name."""

    name: str
    csr_pem: bytes = b""
    fullchain_pem: bytes | None = None
    self_signed: bool = False   # the door's placeholder, not a certificate from the CA
    refused: str = ""           # why the host would not make or read it


@frozen
class Installed:
    fingerprint: str = ""       # SHA-256 of the certificate installed, upper-case hex
    served: str = ""            # what the port served after the reload ("" : nothing)
    reload: str = ""            # ok, failed (the old files put back), inactive (no door)
    refused: str = ""

    @property
    def serving(self) -> bool:
        return bool(self.fingerprint) and self.served == self.fingerprint


def read_script(names: Sequence[str], tls_root: str = paths.TLS_ROOT) -> str:
    return render("certs/read.sh.j2", names=list(names), tls_root=tls_root,
                  privkey=paths.PRIVKEY, csr=paths.CSR, fullchain=paths.FULLCHAIN,
                  self_signed=paths.SELF_SIGNED)


def install_script(name: str, fullchain_pem: bytes, connect: str, unit: str = paths.UNIT,
                   tls_root: str = paths.TLS_ROOT) -> str:
    chain_b64 = base64.b64encode(fullchain_pem).decode("ascii")
    return render("certs/install.sh.j2", name=name, dir=f"{tls_root}/{name}",
                  chain_b64=chain_b64, privkey=paths.PRIVKEY, fullchain=paths.FULLCHAIN,
                  combined=paths.COMBINED, self_signed=paths.SELF_SIGNED, unit=unit,
                  connect=connect, seconds=READBACK_SECONDS)


def connect_address(address: str, port: int) -> str:
    """host:port that the host's own read-back connects to: its address when that is an
    IP (the door may listen on it only), else loopback."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return f"127.0.0.1:{port}"
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise HostAnswerError(f"{what} is not base64") from None


def parse_read(stdout: str, names: Sequence[str]) -> dict[str, OnHost]:
    """name -> what the host holds, for every name asked (HostAnswerError otherwise)."""
    out: dict[str, OnHost] = {}
    for line in stdout.splitlines():
        f = line.split("\t")
        if f[0] == "refused" and len(f) == 3:
            if f[1] == "-":
                return {n: OnHost(n, refused=printable(f[2])) for n in names}
            out[f[1]] = OnHost(f[1], refused=printable(f[2]))
        elif f[0] == "cert" and len(f) == 5 and f[1] in names:
            csr = _b64(f[2], f"the CSR of {f[1]}")
            chain = None if f[3] == "-" else _b64(f[3], f"the certificate of {f[1]}")
            out[f[1]] = OnHost(f[1], csr, chain, f[4] == "1")
        elif line.strip():
            raise HostAnswerError(f"unexpected line from the host: {printable(line[:120])!r}")
    missing = [n for n in names if n not in out]
    if missing:
        raise HostAnswerError(f"the host said nothing of {', '.join(missing)}")
    for n, held in out.items():
        if held.csr_pem:
            why = csr_problem(held.csr_pem, n)
            if why:
                out[n] = OnHost(n, refused=why)
    return out


def parse_install(stdout: str) -> Installed:
    values: dict[str, str] = {}
    for line in stdout.splitlines():
        f = line.split("\t")
        if len(f) == 2 and f[0] in ("installed", "served", "reload", "refused"):
            values[f[0]] = f[1]
        elif line.strip():
            raise HostAnswerError(f"unexpected line from the host: {printable(line[:120])!r}")
    if "refused" in values:
        return Installed(refused=printable(values["refused"]))
    fp = values.get("installed", "")
    if not fp or not all(c in "0123456789ABCDEF" for c in fp):
        raise HostAnswerError("the host did not say which certificate it installed")
    served = values.get("served", "-")
    return Installed(fp, "" if served == "-" else printable(served), values.get("reload", ""))


def csr_problem(csr_pem: bytes, name: str) -> str:
    """Why the CSR the host sent is not one to have signed for `name`, or ""."""
    try:
        csr = x509.load_pem_x509_csr(csr_pem)
    except ValueError:
        return "the host's signing request does not parse"
    if not csr.is_signature_valid:
        return "the host's signing request has a bad signature"
    try:
        sans = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "the host's signing request names no DNS name"
    got = [n.lower() for n in sans.get_values_for_type(x509.DNSName)]
    if got != [name]:
        return (f"the host's signing request names {printable(', '.join(got))}, not "
                f"{name} alone")
    return ""


def held(fullchain_pem: bytes) -> Held | None:
    """The first certificate's validity and names, or None when it does not parse."""
    try:
        cert = x509.load_pem_x509_certificates(fullchain_pem)[0]
    except (ValueError, IndexError):
        return None
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = tuple(n.lower() for n in sans.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        names = ()
    return Held(cert.not_valid_before_utc, cert.not_valid_after_utc, names)


def fingerprint(fullchain_pem: bytes) -> str:
    cert = x509.load_pem_x509_certificates(fullchain_pem)[0]
    return cert.fingerprint(hashes.SHA256()).hex().upper()
