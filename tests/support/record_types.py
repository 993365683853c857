"""TXT, MX, SRV and CAA cases shared by the per-provider round trips
(tests/integration/test_dns_record_types.py, tests/cloud/test_dns_types_route53.py): the
records an inventory declares, what every provider must end up holding, and apply then
plan through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from provision.cli import main
from provision.dns.rrset import normalise_value

DKIM = "v=DKIM1; k=rsa; p=" + "A" * 300        # longer than one 255-octet string


def records(zone: str) -> dict[str, Any]:
    z = zone.rstrip(".")
    return {
        "@": [{"type": "CAA", "values": ['0 issue "letsencrypt.org"',
                                         f'0 iodef "mailto:security@{z}"',
                                         '128 issuewild ";"']},
              {"type": "MX", "values": [f"10 mx1.{z}", f"20 MX2.{z}."], "ttl": 3600},
              {"type": "TXT", "values": ["v=spf1 mx -all", '"first" "second"']}],
        "sel._domainkey": {"type": "TXT", "values": [DKIM], "ttl": 600},
        "_sip._tcp": {"type": "SRV", "values": [f"10 60 5060 sip.{z}", f"20 0 5060 sip2.{z}"]},
        "mx1": {"type": "A", "values": ["127.0.0.25"]},
    }


# what every provider must end up holding (our canonical form, after the provider's own)
def expected(zone: str) -> dict[tuple[str, str], list[str]]:
    z = zone.rstrip(".") + "."
    half = "v=DKIM1; k=rsa; p=" + "A" * (255 - len("v=DKIM1; k=rsa; p="))
    return {
        (z, "CAA"): sorted(['0 issue "letsencrypt.org"', f'0 iodef "mailto:security@{z[:-1]}"',
                            '128 issuewild ";"']),
        (z, "MX"): [f"10 mx1.{z}", f"20 mx2.{z}"],
        (z, "TXT"): sorted(['"v=spf1 mx -all"', '"first" "second"']),
        (f"sel._domainkey.{z}", "TXT"): [f'"{half}" "{"A" * (len(DKIM) - 255)}"'],
        (f"_sip._tcp.{z}", "SRV"): [f"10 60 5060 sip.{z}", f"20 0 5060 sip2.{z}"],
    }


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def round_trip(inv: Path) -> dict[str, Any]:
    r = cli("dns", "plan", "-i", str(inv), "--detailed-exitcode", "--json")
    assert r.exit_code == 3, r.output
    plan = json.loads(r.stdout)
    assert plan["summary"] == {"add": 6, "change": 0, "destroy": 0}, plan
    r = cli("dns", "apply", "-i", str(inv), "--yes")
    assert r.exit_code == 0, r.output
    r = cli("dns", "plan", "-i", str(inv), "--detailed-exitcode", "--json")
    assert r.exit_code == 0, r.output   # no perpetual diff: what the provider returns is ours
    return dict(json.loads(r.stdout))


def canonical(rtype: str, values: list[str]) -> list[str]:
    return sorted(normalise_value(rtype, v) for v in values)
