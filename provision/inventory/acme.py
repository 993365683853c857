"""The inventory's `acme:` section: which ACME CA issues the certificates, and how to
reach it (issue 36, item 2). Pure, no I/O.

```yaml
acme:
  ca: letsencrypt            # or letsencrypt-staging, or an ACME directory URL (https://)
  email: ops@example.org     # the account's contact (optional)
  ca_bundle: pebble.pem      # PEM roots that the ACME server's TLS certificate chains to
                             # (a lab CA such as Pebble); default: the system's
  caa_identities: [letsencrypt.org]  # the CA's CAA identity (default: the directory's
                                     # meta.caaIdentities)
  eab:                       # external account binding, for CAs that require it
    kid: abc123
    hmac_key_file: eab.key   # beside the inventory or in ~/.config/provision
```

The directory URL must be https:// (a plain-http CA would let anyone on the path change
the challenge and the certificate), except to a loopback address, where a local test CA
may listen. The EAB key is a secret: its file lies where `provision.dnsdata.secrets` allows
DNS keys to lie, and is read only when an account is made.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from provision.dnsdata.endpoint import problem as endpoint_problem
from provision.frozen import frozen
from provision.secretdata.fields import SecretName

from .fields import FilePath

# The CAs an inventory may name by a word; anything else is the URL of a directory.
KNOWN_CAS: Mapping[str, str] = {
    "letsencrypt": "https://acme-v02.api.letsencrypt.org/directory",
    "letsencrypt-staging": "https://acme-staging-v02.api.letsencrypt.org/directory",
}
# Let's Encrypt's CAA identity (its directory says it too, in meta.caaIdentities)
_KNOWN_IDENTITIES: Mapping[str, tuple[str, ...]] = {
    "letsencrypt": ("letsencrypt.org",),
    "letsencrypt-staging": ("letsencrypt.org",),
}

_EMAIL = r"^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(\.[A-Za-z0-9-]{1,63})+$"
_KID = r"^[A-Za-z0-9_=-]{1,256}$"
_DOMAIN = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$"
_CA = r"^[A-Za-z0-9:/._~\[\]%-]{1,512}$"

Email = Annotated[StrictStr, Field(pattern=_EMAIL)]
Kid = Annotated[StrictStr, Field(pattern=_KID)]
CaaIdentity = Annotated[StrictStr, Field(pattern=_DOMAIN)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class EabDoc(_Strict):
    """External account binding: the key id and the HMAC key the CA gave you."""

    pattern_words: ClassVar[Mapping[str, str]] = {
        "kid": "a key id as the CA gives it: 1 to 256 letters, digits, '_', '-' or '='"}

    kid: Kid = Field(description="the key id the CA gave you")
    hmac_key_file: FilePath | None = Field(
        None, description="a file holding the HMAC key (base64url, as the CA gives it), beside "
                          "the inventory or in ~/.config/provision")
    hmac_key_secret: SecretName | None = Field(
        None, description="or: the name of a secret of the inventory (`secrets:`) holding it")


class AcmeDoc(_Strict):
    """The ACME CA certificates are issued by (DNS-01, through the inventory's zones)."""

    pattern_words: ClassVar[Mapping[str, str]] = {
        "email": "an email address (local@domain.tld)",
        "ca": "letsencrypt, letsencrypt-staging, or an ACME directory URL (https://...)",
        "caa_identities": "a CA's CAA identity: a lowercase domain name such as letsencrypt.org",
    }

    ca: Annotated[StrictStr, Field(pattern=_CA)] = Field(
        "letsencrypt", description="letsencrypt (default), letsencrypt-staging, or the "
                                   "https:// URL of any ACME directory")
    email: Email | None = Field(None, description="the account's contact address")
    ca_bundle: FilePath | None = Field(
        None, description="PEM file of the roots the ACME server's TLS certificate chains to "
                          "(a private or lab CA); default: the system's roots")
    caa_identities: Annotated[list[CaaIdentity], Field(min_length=1)] | None = Field(
        None, description="the domains a CAA record names to allow this CA (default: the "
                          "directory's meta.caaIdentities; letsencrypt.org for Let's Encrypt)")
    eab: EabDoc | None = Field(None, description="external account binding, for CAs that "
                                                 "require one")


@frozen
class Acme:
    """The ACME CA of the inventory, resolved."""

    ca: str                         # as written: a known CA's word, or the URL
    directory: str                  # the directory URL
    email: str | None = None
    ca_bundle: str | None = None    # absolute local path, or None for the system's roots
    caa_identities: tuple[str, ...] = ()  # () : ask the directory
    eab_kid: str | None = None
    eab_hmac_key_file: str | None = None  # absolute local path (a secret)
    eab_hmac_key_secret: str | None = None  # or the inventory's secret of that name


Problems = list[tuple[tuple[str, ...], str]]


def resolve(doc: AcmeDoc, local_path: Callable[[tuple[str, ...], str], str],
            secret_problem: Callable[[str], str | None],
            secrets: Collection[str] = ()) -> tuple[Acme, Problems]:
    """The resolved section and its problems (field path under `acme`, message).
    `local_path` resolves a file the inventory names (relative to its file);
    `secret_problem` says why a file may not be a secret of this inventory; `secrets`:
    the names in the inventory's `secrets:`."""
    problems: Problems = []
    why: str | None
    directory = KNOWN_CAS.get(doc.ca, doc.ca)
    if doc.ca not in KNOWN_CAS:
        if not re.match(r"^[a-z]+://", doc.ca):
            problems.append((("ca",), f"'{doc.ca}' is no CA provision knows "
                             f"({', '.join(KNOWN_CAS)}) and no URL: give one of those, or "
                             "the https:// URL of an ACME directory"))
        else:
            why = endpoint_problem(doc.ca, "the ACME directory")
            if why:
                problems.append((("ca",), why.replace("signed requests and bearer tokens",
                                                      "the account's signed requests, the "
                                                      "challenges and the certificates")))
    bundle = local_path(("ca_bundle",), doc.ca_bundle) if doc.ca_bundle else None
    hmac: str | None = None
    eab = doc.eab
    if eab is not None and (eab.hmac_key_file is None) == (eab.hmac_key_secret is None):
        problems.append((("eab",), "give the HMAC key as hmac_key_file or as hmac_key_secret "
                         "(one of them)"))
    elif eab is not None and eab.hmac_key_file is not None:
        path = local_path(("eab", "hmac_key_file"), eab.hmac_key_file)
        hmac = path
        why = secret_problem(path)
        if why:
            problems.append((("eab", "hmac_key_file"), why))
    elif eab is not None and eab.hmac_key_secret not in secrets:
        problems.append((("eab", "hmac_key_secret"), f"no secret '{eab.hmac_key_secret}' in "
                         f"the inventory's secrets (set it with `provision secrets set "
                         f"{eab.hmac_key_secret}`)"))
    identities = tuple(doc.caa_identities or _KNOWN_IDENTITIES.get(doc.ca, ()))
    return Acme(ca=doc.ca, directory=directory, email=doc.email, ca_bundle=bundle,
                caa_identities=identities, eab_kid=eab.kid if eab else None,
                eab_hmac_key_file=hmac,
                eab_hmac_key_secret=eab.hmac_key_secret if eab else None), problems
