"""ACME problem documents (RFC 8555 §6.7) in words (pure)."""

from __future__ import annotations

from provision.text import printable

_PREFIX = "urn:ietf:params:acme:error:"

_WHY = {
    "rateLimited": "the CA's rate limit was reached",
    "badNonce": "the CA refused a nonce (retried once already)",
    "caa": "the CA's CAA check refused the name",
    "dns": "the CA could not resolve the challenge record",
    "unauthorized": "the CA did not accept the challenge answer",
    "rejectedIdentifier": "the CA will not issue for this name",
    "externalAccountRequired": "the CA requires external account binding (acme.eab in the "
                               "inventory)",
    "accountDoesNotExist": "the account is not known to the CA",
    "badCSR": "the CA refused the certificate request",
    "serverInternal": "the CA had an internal error",
    "malformed": "the CA called a request malformed",
    "orderNotReady": "the order was not ready to finalize",
    "incorrectResponse": "the challenge answer did not match",
    "connection": "the CA could not connect",
}


def describe(typ: str | None, detail: str | None, retry_after: str | None = None) -> str:
    """One line naming the cause of an ACME error, the CA's own words escaped."""
    kind = (typ or "").removeprefix(_PREFIX)
    why = _WHY.get(kind, f"the CA answered with an error ({printable(kind or 'no type')})")
    said = f": {printable((detail or '').strip()[:300])}" if detail and detail.strip() else ""
    again = f" (it says to retry after {printable(retry_after)})" if retry_after else ""
    return f"{why}{said}{again}"
