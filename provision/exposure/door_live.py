"""What a door really serves, from the host's own view (`audit`; pure): the certificate each
door port presents against the one installed for its name, the placeholder that stands in
until a CA's certificate is there, and how long the certificate has left."""

from __future__ import annotations

from provision.facts.door import DoorFact
from provision.finding import Finding
from provision.inventory.model import Host

EXPIRY_DAYS = 14  # a certificate closer than this to its end is a finding


def served_findings(host: Host, fact: DoorFact, now: float) -> list[Finding]:
    out: list[Finding] = []
    for s in host.services:
        if s.https is None:
            continue
        name, port = s.https.name, s.https.port
        subject = f"{host.name}/{s.name}"
        renew = f"provision certs renew {host.name}"
        cert = fact.certs.get(name)
        served = fact.served.get(port)
        if cert is None or cert.fingerprint is None:
            out.append(Finding("error", "door-no-certificate", subject,
                               f"no certificate for {name} on the host", "provision apply"))
        if served is None or served.fingerprint is None:
            out.append(Finding("error", "door-not-serving", subject,
                               f"port {port} presents no certificate (the door is not serving)",
                               "provision apply; `systemctl status provision-door` on the host"))
        elif cert is not None and cert.fingerprint and served.fingerprint != cert.fingerprint:
            out.append(Finding("error", "door-cert-differs", subject,
                               f"port {port} presents {served.fingerprint[:16]}…, not the "
                               f"certificate installed for {name} ({cert.fingerprint[:16]}…): "
                               "another name's, or a reload that never took",
                               "provision apply (it reloads the door and reads it back)"))
        if cert is not None and cert.self_signed:
            out.append(Finding("warning", "door-cert-placeholder", subject,
                               f"{name} is served with the door's self-signed placeholder: no "
                               "CA certificate yet, clients refuse it", renew))
        if cert is not None and cert.not_after is not None:
            days = (cert.not_after - now) / 86400
            if days < EXPIRY_DAYS:
                out.append(Finding("error" if days < 2 else "warning", "door-cert-expiring",
                                   subject, f"the certificate for {name} "
                                   + (f"expired {-days:.1f} days ago" if days < 0 else
                                      f"expires in {days:.1f} days"), renew))
    return out
