"""The migration guard of `dns plan`/`apply`, as fixture cases (tests/fixtures/dns_guard/):
cutovers classified by the TTL in the zone, reverts of a finished migration refused,
closed records expired, hostile closed records never acted on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.dns.migrate import closed as C
from provision.dns.migrate.guard import review
from provision.dns.migrate.marker import parse_iso
from provision.dns.rrset import RRset, absolute, relative, rrset
from provision.dns.zone_plan import plan_zone

CASES = sorted((Path(__file__).parents[1] / "fixtures" / "dns_guard").glob("*.yml"))
NOW = parse_iso("2026-12-01T10:00:00Z")


def _rr(zone: str, row: list[Any]) -> RRset:
    name, rtype, ttl, values = row
    return rrset(absolute(name, zone), rtype, ttl, values)


def _actual(case: dict[str, Any], zone: str) -> list[RRset]:
    out = [_rr(zone, row) for row in case.get("actual", [])]
    for c in case.get("closed", []):
        at = NOW - c["ago"]
        out.append(C.closed_rrset(C.Closed(
            absolute(c["name"], zone), c.get("type", "A"), at, at + c.get("keep", C.DEFAULT_KEEP),
            c["by"], tuple(c["from"]), tuple(c["to"]))))
    for name, strings in case.get("txt", []):
        out.append(rrset(absolute(name, zone), "TXT", 300, strings))
    return out


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_guard_case(path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    zone, opts, expect = case["zone"], case.get("options", {}), case["expect"]
    want = [_rr(zone, row) for row in case.get("want", [])]
    actual = _actual(case, zone)
    rv = review(zone, want, actual, NOW, cutover_above_ttl=opts.get("cutover_above_ttl", 300),
                allow_revert=frozenset(absolute(n, zone) for n in opts.get("allow_revert", ())),
                no_migrate=opts.get("no_migrate", False),
                closed_migration_days=opts.get("closed_migration_days", 7))
    plan = plan_zone(zone, want, actual, hold=rv.hold, expire=rv.expire)
    origin = absolute("@", zone)

    def key(name: str, rtype: str) -> str:
        return f"{relative(name, origin)} {rtype}"

    assert sorted(f"{c.op} {key(*c.key)}" for c in plan.changes) == sorted(expect.get("changes", []))
    assert sorted(key(*k) for k in rv.hold) == sorted(expect.get("held", []))
    assert sorted(key(c.name, c.type) for c in rv.cutovers) == sorted(expect.get("cutovers", []))
    assert sorted(relative(rr.name, origin) for rr in plan.expired) == sorted(expect.get("expired", []))
    assert not rv.reverts or "reverts" in expect, rv.reverts
    assert not rv.errors or "errors" in expect, rv.errors
    for s in expect.get("errors", []):
        assert any(s in e for e in rv.errors), (s, rv.errors)
    for s in expect.get("reverts", []):
        assert any(s in r for r in rv.reverts), (s, rv.reverts)
    said = [*plan.notes, *rv.notes]
    for s in expect.get("notes", []):
        assert any(s in n for n in said), (s, said)
    # the change set deletes exactly what was read (expired records included) and never
    # touches a held record
    for rr in plan.change_set.deletions:
        assert rr in actual
    held = set(rv.hold)
    assert not [rr for rr in (*plan.change_set.additions, *plan.change_set.deletions) if rr.key in held]
    # a hostile closed record is never deleted (not acted on)
    for name, _ in case.get("txt", []):
        assert absolute(name, zone) not in {rr.name for rr in plan.expired}


def test_every_fixture_says_what_it_checks() -> None:
    assert len(CASES) >= 20
    for p in CASES:
        assert p.read_text().startswith("#"), p
