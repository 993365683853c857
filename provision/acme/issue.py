"""One certificate from the inventory's ACME CA, for a CSR made elsewhere (I/O: the CA
over HTTPS, the zones through `dns01`).

The order of things, each a clear error before the next: the directory read (the CA
reachable, its TLS certificate trusted), CAA checked for every name (a CA the zone
forbids is refused before any order), a leftover challenge of an earlier run removed,
the account found or made, the order placed, the challenge records written and seen
served by every authoritative server, answered, the order finalized, the chain
downloaded; the challenge records are removed whatever happened. The private key is
never here: the CSR is all the CA and this machine see.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import requests
from acme import challenges, client, messages
from acme import errors as acme_errors
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from josepy.jwa import ES256
from josepy.jwk import JWKEC

from provision.dnsdata.secrets import read_bound
from provision.errors import OperationError
from provision.frozen import frozen
from provision.inventory.acme import KNOWN_CAS, Acme
from provision.inventory.model import Inventory
from provision.secrets import unlock
from provision.text import printable

from . import account, caa, problems
from .challenge import record_name
from .dns01 import Dns01

Log = Callable[[str], None]


class CaError(OperationError):
    """The CA could not be reached, or refused (exit 1): the message names the cause."""


class CaaRefused(OperationError):
    """A CAA record of the zone forbids the CA (exit 1), found before any order."""


@frozen
class Issued:
    fullchain_pem: bytes
    names: tuple[str, ...]
    account_url: str


ACCOUNT_GONE = "urn:ietf:params:acme:error:accountDoesNotExist"


class AccountGone(CaError):
    """The CA does not know the account this machine remembers."""


@contextmanager
def _ca(what: str, url: str) -> Iterator[None]:
    """Every failure of a call to the CA as one CaError naming it."""
    try:
        yield
    except messages.Error as e:
        kind = AccountGone if e.typ == ACCOUNT_GONE else CaError
        raise kind(f"{what} at {printable(url)}: {problems.describe(e.typ, e.detail)}") from None
    except acme_errors.ValidationError as e:
        details = []
        for authz in e.failed_authzrs:
            for ch in authz.body.challenges:
                if ch.error is not None:
                    details.append(f"{authz.body.identifier.value}: "
                                   f"{problems.describe(ch.error.typ, ch.error.detail)}")
        raise CaError(f"{what} at {printable(url)}: the CA did not validate the challenge "
                      f"({'; '.join(details) or 'no reason given'})") from None
    except acme_errors.TimeoutError:
        raise CaError(f"{what} at {printable(url)}: the order was not ready in time") from None
    except requests.exceptions.SSLError as e:
        raise CaError(f"{what}: the CA at {printable(url)} presented a certificate this "
                      f"machine does not trust ({printable(str(e)[:200])}); for a private or "
                      "lab CA give acme.ca_bundle") from None
    except requests.exceptions.RequestException as e:
        raise CaError(f"{what}: the CA at {printable(url)} could not be reached "
                      f"({type(e).__name__}: {printable(str(e)[:200])})") from None
    except acme_errors.Error as e:
        raise CaError(f"{what} at {printable(url)}: {printable(str(e)[:300])}") from None


class Ca:
    """A session with the inventory's CA: its directory, and (once asked) the account."""

    def __init__(self, inv: Inventory, timeout: int = 30):
        self.inv = inv
        self.settings = settings_of(inv)
        url = self.settings.directory
        key = load_pem_private_key(account.load_key(url), None)
        self.key: Any = JWKEC(key=key)
        self.net = client.ClientNetwork(self.key, alg=ES256, user_agent="provision",
                                        timeout=timeout)
        if self.settings.ca_bundle:
            # requests takes a path as `verify`; the library's annotation says bool only
            vars(self.net)["verify_ssl"] = self.settings.ca_bundle
        with _ca("reading the directory", url):
            self.directory = client.ClientV2.get_directory(url, self.net)
        self.client = client.ClientV2(self.directory, self.net)
        self._account = ""

    @property
    def identities(self) -> tuple[str, ...]:
        given = self.settings.caa_identities
        meta = getattr(self.directory, "meta", None)
        return given or tuple(getattr(meta, "caa_identities", None) or ())

    def register(self, again: bool = False) -> str:
        """The account's URL: the one remembered, else found by key, else made. `again`:
        the CA does not know the remembered one: forget it and register anew."""
        url = self.settings.directory
        if again:
            account.forget_url(url)
            self._account = ""
            self.net.account = None  # a new-account request is signed with the key itself
        if self._account:
            return self._account
        known = account.load_url(url)
        if known:
            self.net.account = messages.RegistrationResource(uri=known, body=messages.Registration())
            self._account = known
            return known
        eab = None
        hmac = eab_hmac(self.inv, self.settings)
        if self.settings.eab_kid and hmac is not None:
            eab = messages.ExternalAccountBinding.from_data(
                account_public_key=self.key.public_key(), kid=self.settings.eab_kid,
                hmac_key=hmac,
                directory=self.directory)
        reg = messages.NewRegistration.from_data(
            email=self.settings.email, terms_of_service_agreed=True,
            external_account_binding=eab)
        with _ca("registering the account", url):
            try:
                regr = self.client.new_account(reg)
                uri = str(regr.uri)
            except acme_errors.ConflictError as e:  # the key has an account already
                uri = str(e.location)
                self.net.account = messages.RegistrationResource(uri=uri, body=messages.Registration())
        account.save_url(url, uri)
        self._account = uri
        return uri

    def renewal_time(self, cert_pem: bytes) -> dt.datetime | None:
        """When the CA's renewal information says to renew (None: it offers none, or
        could not be asked; the third-of-lifetime rule then decides)."""
        try:  # the library returns None itself when the directory has no renewalInfo
            when, _ = self.client.renewal_time(cert_pem)
        except acme_errors.ARIError:
            return None
        if when is not None and when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        return when


def settings_of(inv: Inventory) -> Acme:
    """The inventory's acme: section; without one, Let's Encrypt with no contact."""
    if inv.acme is not None:
        return inv.acme
    return Acme(ca="letsencrypt", directory=KNOWN_CAS["letsencrypt"],
                caa_identities=("letsencrypt.org",))


def eab_hmac(inv: Inventory, settings: Acme) -> str | None:
    """The EAB HMAC key: from its file, or from the inventory's secret (decrypted now, with
    the operator's key); None without EAB."""
    if settings.eab_hmac_key_file:
        return _read_hmac(inv, settings.eab_hmac_key_file)
    if settings.eab_hmac_key_secret:
        raw = unlock.one(inv, settings.eab_hmac_key_secret).reveal()
        return raw.decode("ascii", "replace").strip()
    return None


def _read_hmac(inv: Inventory, path: str) -> str:
    try:
        raw = read_bound(path, 4096, "EAB HMAC key", inv.tree)
    except OSError as e:
        raise OperationError(f"the EAB key {printable(path)}: {e.strerror or e}") from None
    return raw.decode("ascii", "replace").strip()


def check_caa(ca: Ca, dns: Dns01, names: Sequence[str]) -> None:
    """CaaRefused when a CAA record in a name's zone forbids this CA (before any order)."""
    for name in names:
        apex, records = dns.caa_records(name)
        why = caa.problem(name, records, ca.identities, apex, ca.settings.ca)
        if why:
            raise CaaRefused(why)


def issue(inv: Inventory, csr_pem: bytes, names: Sequence[str], *, ca: Ca | None = None,
          dns: Dns01 | None = None, log: Log = lambda _: None,
          order_timeout: float = 90.0) -> Issued:
    """The full chain (PEM) for `csr_pem`, whose names are `names`."""
    ca = ca or Ca(inv)
    dns = dns or Dns01(inv)
    url = ca.settings.directory
    check_caa(ca, dns, names)
    for name in names:
        if dns.remove(name):
            log(f"removed a challenge record left behind for {name}")
    account_url = ca.register()
    try:
        with _ca("placing the order", url):
            order = ca.client.new_order(csr_pem)
    except AccountGone:
        log(f"the CA does not know the account {printable(account_url)} this machine "
            "remembered (a CA that forgot it): registering again")
        account_url = ca.register(again=True)
        with _ca("placing the order", url):
            order = ca.client.new_order(csr_pem)
    answers: list[tuple[Any, Any]] = []
    records: dict[str, list[str]] = {}
    for authz in order.authorizations:
        if authz.body.status.name == "valid":
            continue
        found = [c for c in authz.body.challenges if isinstance(c.chall, challenges.DNS01)]
        if not found:
            raise CaError(f"the CA at {printable(url)} offers no dns-01 challenge for "
                          f"{printable(authz.body.identifier.value)}")
        chall = found[0]
        name = authz.body.identifier.value
        records.setdefault(name, []).append(chall.chall.validation(ca.key))
        answers.append((chall, chall.chall.response(ca.key)))
    written: list[str] = []
    try:
        for name, values in records.items():
            written.append(name)
            rname = dns.write(name, values)
            log(f"wrote {rname} TXT")
        dns.wait_served({record_name(n): v for n, v in records.items()})
        log("every authoritative server answers the challenge")
        with _ca("answering the challenge", url):
            for chall, response in answers:
                ca.client.answer_challenge(chall, response)
        deadline = dt.datetime.now() + dt.timedelta(seconds=order_timeout)
        with _ca("finalizing the order", url):
            order = ca.client.poll_and_finalize(order, deadline)
    finally:
        for name in written:
            dns.remove(name)
    if not order.fullchain_pem:
        raise CaError(f"the CA at {printable(url)} finalized the order without a certificate")
    return Issued(order.fullchain_pem.encode(), tuple(names), account_url)

