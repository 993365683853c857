"""What `check` says about a public service's front door (docs/door.md). Pure.

A service open to the internet without the door is plain HTTP: every prompt, answer and
key crosses the internet readable, and anyone can spend the GPU. That is an error unless
the inventory says why it must be so (`plain_http: REASON`). A door without keys is
open to everyone (limited per address only): a warning naming it.
"""

from __future__ import annotations

from provision.finding import Finding
from provision.inventory.model import Host, Service

from .internet import covers_internet


def door_findings(host: Host, s: Service) -> list[Finding]:
    subject = f"{host.name}/{s.name}"
    field = f"hosts.{host.name}.services.{s.name}"
    if s.expose.kind != "public":
        return []
    if s.https is not None:
        if s.https.keys:
            return []
        return [Finding("warning", "door-without-keys", subject,
                        f"{s.name} is served at https://{s.https.name}:{s.https.port} with no API "
                        f"keys: anyone who reaches it uses it (limited only per address)",
                        f"add keys: `provision keys new {s.name} CLIENT`", f"{field}.https.keys")]
    if s.plain_http is not None or s.runs_code or not covers_internet(s.expose.sources):
        # the opt-out says why; code servers have their own error (code-exec-public)
        return []
    return [Finding("error", "plain-http-public", subject,
                    f"{s.name} is open to the internet ({', '.join(s.expose.sources)}) on tcp {s.port} "
                    "as plain HTTP: requests, answers and keys cross it readable, and anyone can "
                    "use it", "serve it through the door (https: {name: ..., keys: ...}, "
                    "docs/door.md), or say why it must be plain HTTP (plain_http: REASON)", field)]
