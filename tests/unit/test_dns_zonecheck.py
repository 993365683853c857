"""Whole-zone verification and forgotten low TTLs, as fixture cases
(tests/fixtures/dns_zonecheck/): servers' answers in, `zonecheck.judge`'s per-record
verdicts and TTL findings out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.commands.dns_zonecheck import summary
from provision.dns.migrate.marker import Marker, marker_name, marker_rrset, parse_iso
from provision.dns.propagation import Answer, Target
from provision.dns.rrset import RRset, absolute, normalise_value, relative, rrset
from provision.dns.zonecheck import Question, judge, questions

CASES = sorted((Path(__file__).parents[1] / "fixtures" / "dns_zonecheck").glob("*.yml"))
NOW = parse_iso("2026-12-01T10:00:00Z")


def _records(case: dict[str, Any]) -> list[RRset]:
    return [rrset(absolute(n, case["zone"]), t, ttl, v) for n, t, ttl, v in case["records"]]


def _marker_strings(name: str, m: dict[str, Any]) -> tuple[str, ...]:
    mk = Marker(m["phase"], m["type"], m["ttl"], m["lower"], NOW - m["started_ago"],
                NOW - m["at_ago"], tuple(m.get("from", ())), tuple(m.get("to", ())),
                m.get("by", ""))
    return marker_rrset(name, mk).values


def _answers(case: dict[str, Any], targets: list[Target],
             records: list[RRset]) -> dict[Question, Answer]:
    zone = case["zone"]
    by_label = {t.label: t for t in targets}
    out: dict[Question, Answer] = {}
    for t in targets:
        auth = t.role == "authoritative"
        for rr in records:
            out[(t, rr.name, rr.type)] = Answer(t, "NOERROR", auth, rr.values, rr.ttl)
        for n in dict.fromkeys(rr.name for rr in records):
            if auth:
                out[(t, marker_name(n), "TXT")] = Answer(t, "NXDOMAIN", True, negative_ttl=5)
    for label, rows in (case.get("answers") or {}).items():
        t = by_label[label]
        if rows == "down":
            for key in [k for k in out if k[0] == t]:
                out[key] = Answer(t, "TIMEOUT", error="no answer within 2 s")
            continue
        for row in rows:
            key = (t, absolute(row[0], zone), row[1])
            if row[2] == "missing":
                del out[key]
                continue
            _, rtype, status, aa, ttl, values = row
            out[key] = Answer(t, status, aa, tuple(sorted(normalise_value(rtype, v) for v in values)),
                              ttl)
    for m in case.get("markers", []):
        name = absolute(m["name"], zone)
        strings = tuple(m["strings"]) if "strings" in m else _marker_strings(name, m["marker"])
        for label in m.get("servers", [t.label for t in targets if t.role == "authoritative"]):
            t = by_label[label]
            out[(t, marker_name(name), "TXT")] = Answer(t, "NOERROR", True, tuple(sorted(strings)), 60)
    return out


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_zonecheck_case(path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    zone, expect = case["zone"], case["expect"]
    targets = [Target(label, f"192.0.2.{100 + i}", role)
               for i, (label, role) in enumerate(case["servers"])]
    records = _records(case)
    report = judge(zone, records, targets, _answers(case, targets, records), NOW)
    origin = absolute("@", zone)
    assert sorted(f"{relative(v.name, origin)} {v.type} {s}" for v in report.verdicts
                  for s in v.disagree) == sorted(expect["disagree"])
    assert sorted(f"{f.kind} {relative(f.name, origin)} {f.type}" for f in report.findings) \
        == sorted(expect["findings"])
    assert report.ok is expect["ok"]
    assert [(v.name, v.type) for v in report.verdicts] == [rr.key for rr in records]
    notes = [n for v in report.verdicts for n in v.notes]
    for s in expect.get("notes", []):
        assert any(s in n for n in notes), (s, notes)
    details = [f.detail for f in report.findings]
    for s in expect.get("details", []):
        assert any(s in d for d in details), (s, details)


def test_every_fixture_says_what_it_checks() -> None:
    assert len(CASES) >= 15
    for p in CASES:
        assert p.read_text().startswith("#"), p


def test_one_question_per_record_per_server_and_one_marker_per_name_per_authority() -> None:
    auth = [Target(f"ns{i}", f"192.0.2.{i}", "authoritative") for i in (1, 2)]
    res = Target("r", "192.0.2.53", "resolver")
    recs = [rrset("a.example.org.", "A", 300, ["192.0.2.1"]),
            rrset("a.example.org.", "AAAA", 300, ["2001:db8::1"]),
            rrset("b.example.org.", "CNAME", 300, ["a.example.org."])]
    qs = questions(recs, [*auth, res])
    assert len(qs) == 3 * 3 + 2 * 2 == len(set(qs))
    assert {(t.label, n) for t, n, ty in qs if ty == "TXT"} == {
        (t.label, f"_provision-migration.{x}.example.org.") for t in auth for x in "ab"}
    assert not [q for q in qs if q[0] is res and q[2] == "TXT"]
    # a private zone has no authoritative server here: its resolvers are asked for markers
    qs = questions(recs, [res])
    assert {(t.label, n) for t, n, ty in qs if ty == "TXT"} == {
        (res.label, f"_provision-migration.{x}.example.org.") for x in "ab"}


def test_a_check_that_asked_no_server_is_not_ok() -> None:
    # no target, no answer: nobody disagrees, but nothing was verified either
    recs = [rrset("a.example.org.", "A", 300, ["192.0.2.1"])]
    report = judge("example.org.", recs, [], {}, NOW)
    assert not report.disagreeing and not report.findings
    assert not report.ok
    assert "no server was asked" in str(summary(report))


def test_a_check_through_resolvers_only_does_not_claim_the_ttls_were_compared() -> None:
    res = Target("r", "192.0.2.53", "resolver")
    recs = [rrset("a.example.org.", "A", 3600, ["192.0.2.1"])]
    answers = {(res, "a.example.org.", "A"): Answer(res, "NOERROR", False, ("192.0.2.1",), 60)}
    report = judge("example.org.", recs, [res], answers, NOW)
    assert report.ok
    assert "no TTL left low" not in str(summary(report))
    assert "served TTLs not compared" in str(summary(report))
