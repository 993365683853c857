"""When a certificate is renewed (pure).

A certificate is renewed when it has less than a third of its lifetime left (certbot's
and Let's Encrypt's advice for 90-day certificates: renew at 60 days), or, when the CA
offers ACME Renewal Information (RFC 9773, ARI), from the time the CA's window says
(the `acme` library picks the time inside the window). No certificate, an expired one, or
one that does not name what the inventory declares, is renewed at once.
"""

from __future__ import annotations

from datetime import datetime

from provision.frozen import frozen


@frozen
class Held:
    """What is known of the certificate in place."""

    not_before: datetime        # aware (UTC)
    not_after: datetime
    names: tuple[str, ...]      # its DNS subject alternative names, lowercase


@frozen
class Decision:
    renew: bool
    reason: str
    due: datetime | None = None  # when it will be due (None: now, or unknown)


def decide(held: Held | None, name: str, now: datetime,
           ari: datetime | None = None) -> Decision:
    """Whether the certificate for `name` is renewed now (`now` aware UTC; `ari`: the
    time the CA's renewal information says to renew from, when it offers any)."""
    if held is None:
        return Decision(True, "no certificate yet")
    if name.lower().rstrip(".") not in held.names:
        return Decision(True, f"the certificate names {', '.join(held.names) or 'nothing'}, "
                              f"not {name}")
    if now >= held.not_after:
        return Decision(True, f"expired at {held.not_after:%Y-%m-%d %H:%M} UTC")
    if ari is not None:
        if now >= ari:
            return Decision(True, f"the CA's renewal window opened (renew from "
                                  f"{ari:%Y-%m-%d %H:%M} UTC)", ari)
        return Decision(False, f"the CA's renewal window: renew from {ari:%Y-%m-%d %H:%M} UTC",
                        ari)
    lifetime = held.not_after - held.not_before
    due = held.not_after - lifetime / 3
    left = held.not_after - now
    days = left.total_seconds() / 86400
    if now >= due:
        return Decision(True, f"{days:.1f} days left, less than a third of its lifetime "
                              f"({lifetime.total_seconds() / 86400:.0f} days)", due)
    return Decision(False, f"{days:.1f} days left; due from {due:%Y-%m-%d %H:%M} UTC", due)
