"""`audit` on a door (pure): what the port presents against the certificate installed for
its name, the placeholder, and the time left (issue 36)."""

from __future__ import annotations

from pathlib import Path

import yaml

from provision.exposure.door_live import served_findings
from provision.facts.door import CertFact, DoorFact, ServedFact
from provision.inventory import load_inventory
from provision.inventory.model import Host

NOW = 1_800_000_000.0
DAY = 86400
A, B = "ab" * 32, "cd" * 32


def _host(tmp_path: Path) -> Host:
    doc = {"version": 1, "defaults": {"user": "ubuntu"},
           "bastions": {"jump": {"address": "10.0.0.5", "allow_ssh_from": ["10.9.0.0/24"]}},
           "hosts": {"gpu1": {"address": "10.0.1.21", "via": "jump", "services": {"api": {
               "port": 8000, "command": "/usr/bin/true", "expose": {"from": ["0.0.0.0/0"]},
               "https": {"name": "api.example.org", "keys": {"alice": "sha256:" + "ab" * 32}}}}}},
           "dns": {"zones": {"example.org": {"provider": "route53"}}}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    return load_inventory(p).hosts[0]


def _fact(*, served: str | None = A, installed: str | None = A, days: float = 60,
          self_signed: bool = False) -> DoorFact:
    certs = {} if installed is None else {"api.example.org": CertFact(
        "api.example.org", installed, int(NOW + days * DAY), self_signed, True, True)}
    return DoorFact(certs, {443: ServedFact(443, "00" * 16, served)})


def codes(host: Host, fact: DoorFact) -> list[str]:
    return [f.code for f in served_findings(host, fact, NOW)]


def test_serving_the_installed_ca_certificate_is_clean(tmp_path: Path) -> None:
    assert codes(_host(tmp_path), _fact()) == []


def test_each_problem_is_named(tmp_path: Path) -> None:
    h = _host(tmp_path)
    assert codes(h, _fact(served=B)) == ["door-cert-differs"]
    assert codes(h, _fact(served=None)) == ["door-not-serving"]
    assert codes(h, _fact(installed=None)) == ["door-no-certificate"]
    assert codes(h, _fact(self_signed=True)) == ["door-cert-placeholder"]
    (soon,) = served_findings(h, _fact(days=10), NOW)
    assert (soon.code, soon.severity) == ("door-cert-expiring", "warning")
    assert "expires in 10.0 days" in soon.message and soon.fix == "provision certs renew gpu1"
    (gone,) = served_findings(h, _fact(days=-1), NOW)
    assert gone.severity == "error" and "expired 1.0 days ago" in gone.message
    assert codes(h, _fact(days=14.5)) == []
