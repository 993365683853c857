"""A finished migration's closed record: written at finalize (with who and when), read
strictly, never an open migration, expired after its period; who opened a migration;
`provision check`'s offline warning about a reverted value."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from provision.dns.migrate import closed as C
from provision.dns.migrate import journal, marker, phases, trust
from provision.dns.migrate.guard import check_findings, closed_at
from provision.dns.migrate.journal import Journal
from provision.dns.migrate.phases import ZoneView, reconcile
from provision.dns.rrset import rrset
from provision.inventory import load_inventory

NAME, ZONE = "api.example.org.", "example.org."
T0 = 1_800_000_000.0
MK = "_provision-migration.api.example.org."
CL = "_provision-closed-a.api.example.org."   # api A's closed record


def _j(phase: str = "verified", **kw: object) -> Journal:
    base = Journal(name=NAME, type="A", zone=ZONE, provider="rfc2136",
                   original_values=("192.0.2.10",), original_ttl=300,
                   target_values=("192.0.2.20",), lower_ttl=60, phase="lowering",
                   started_at=T0, by="alice@laptop")
    return replace(base, phase=phase, **kw)  # type: ignore[arg-type]


def _closed(**kw: object) -> C.Closed:
    base = C.Closed(NAME, "A", T0, T0 + C.DEFAULT_KEEP, "bob@desk", ("192.0.2.10",),
                    ("192.0.2.20",))
    return replace(base, **kw)  # type: ignore[arg-type]


def _finalized_view(j: Journal, at: float, keep: float = C.DEFAULT_KEEP) -> ZoneView:
    cs = phases.change_to(replace(j, final_ttl=300), ZoneView(None, None), "finalized", at,
                          by="bob@desk", keep=keep)
    rec = next(rr for rr in cs.additions if rr.type == "A")
    assert not [rr for rr in cs.additions if rr.name == MK]  # the open marker goes
    cl = next((rr for rr in cs.additions if rr.type == "TXT"), None)
    return ZoneView(rec, None, cl)


# --- the record itself -------------------------------------------------------------

def test_round_trip_and_the_message_that_names_the_migration() -> None:
    c = _closed()
    rr = C.closed_rrset(c)
    assert rr.name == CL and rr.type == "TXT" and C.claims_closed(rr)
    assert C.closed_covered(rr.name) == (NAME, "A")
    assert C.closed_covered(C.closed_name("*.example.org.", "AAAA")) == ("*.example.org.", "AAAA")
    assert C.parse(rr) == c
    assert C.describe(c, T0 + 180) == ("api.example.org was moved 192.0.2.10 -> 192.0.2.20 "
                                       "by bob@desk 3 minutes ago")
    assert [C.ago(s) for s in (0, 1, 59, 60, 7199, 86400 * 3)] == [
        "0 seconds", "1 second", "59 seconds", "1 minute", "1 hour", "3 days"]


def _strings(c: C.Closed) -> list[str]:
    return [v[1:-1] for v in C.closed_rrset(c).values]


@pytest.mark.parametrize("mutate, why", [
    (lambda s: [x for x in s if not x.startswith("by=")], "missing by"),
    (lambda s: [*s, "by=eve@x"], "'by' given twice"),
    (lambda s: [*s, "evil=1"], "unknown key"),
    (lambda s: [x.replace("name=api.", "name=www.") for x in s], "it names"),
    (lambda s: [x.replace("type=A", "type=TXT") for x in s], "type"),
    (lambda s: [x.replace("type=A", "type=AAAA") for x in s], "closed record of"),
    (lambda s: [x.replace("from=192.0.2.10", "from=192.0.2.010") for x in s], "not an IP"),
    (lambda s: [x.replace("from=192.0.2.10", "from=::ffff:c000:20a") for x in s], "IPv4"),
    (lambda s: [x.replace("to=192.0.2.20", "to=2001:db8::1") for x in s], "IPv4"),
    (lambda s: [x for x in s if not x.startswith("to=")], "'to' values"),
    (lambda s: [*s, "to=192.0.2.10"] + [x for x in s if False], "the same"),
    (lambda s: [x.replace("by=bob@desk", "by=bob desk") for x in s], "user@host"),
    (lambda s: [x.replace("until=2027", "until=2029") for x in s], "at most 366 days"),
    (lambda s: [x.replace("at=2027", "at=2028") if x.startswith("at=") else x for x in s],
     "until must be after at"),
    (lambda s: [x.replace("T", " ") if x.startswith("at=") else x for x in s], "times"),
    (lambda s: [*s, *(f"to=192.0.2.{i}" for i in range(30, 70))], "strings (at most 40)"),
    (lambda s: [*s[:-1], "to=" + "9" * 300], "characters"),
    (lambda s: [x.replace("provision-migration=1", "provision-migration=2") for x in s],
     "not a closed migration"),
    (lambda s: [*s, "no equals sign"], "without '='"),
])
def test_a_malformed_closed_record_is_refused_naming_the_fault(mutate: object, why: str) -> None:
    c = _closed(at=C.parse_iso("2027-01-01T00:00:00Z"),
                until=C.parse_iso("2027-01-08T00:00:00Z"))
    strings = mutate(_strings(c))  # type: ignore[operator]
    if why == "the same":
        strings = [x for x in _strings(c) if not x.startswith("to=")] + ["to=192.0.2.10"]
    rr = rrset(CL, "TXT", 300, [f'"{s}"' for s in strings])
    with pytest.raises(C.ClosedError, match=re.escape(why)):
        C.parse(rr)
    view = ZoneView(rrset(NAME, "A", 300, ["192.0.2.20"]), None, rr)
    assert view.closed is None  # never taken as a closed record
    # at the open marker's name it is an unreadable marker: refused for the record
    rec = reconcile(None, ZoneView(view.record, replace(rr, name=MK)), name=NAME, zone=ZONE,
                    provider="rfc2136", now=T0)
    assert rec.journal is None and "cannot read" in rec.conflict


def test_unquoted_or_escaped_strings_are_refused() -> None:
    good = C.closed_rrset(_closed())
    for bad in ('"by=a\\"b@c"', "by=x@y"):
        rr = rrset(CL, "TXT", 300, [*good.values, bad])
        with pytest.raises(C.ClosedError):
            C.parse(rr)
    # a provider's unquoted spelling is the same TXT data, read by dnspython as one string
    # (provision.dnsdata.rdata): `phase=closed` is `"phase=closed"`, not a second value
    assert rrset(CL, "TXT", 300, [*good.values, "phase=closed"]) == good


# --- lifecycle ---------------------------------------------------------------------

def test_finalize_writes_the_closed_record_with_who_and_when() -> None:
    j = _j("verified")
    at = T0 + 100
    view = _finalized_view(j, at)
    c = view.closed
    assert c is not None
    assert (c.from_values, c.to_values, c.by, c.type) == (("192.0.2.10",), ("192.0.2.20",),
                                                          "bob@desk", "A")
    assert c.at == at and c.until == at + 7 * 86400 and not c.expired(at + 7 * 86400 - 1)
    assert c.expired(at + 7 * 86400)
    assert view.marker is None and view.marker_free  # no open migration
    # closed_migration_days: 0 leaves no record at all
    assert _finalized_view(j, at, keep=0).closed_rr is None


def test_a_closed_record_never_counts_as_an_open_migration() -> None:
    j = _j("verified")
    view = _finalized_view(j, T0 + 100)
    # no journal on this machine: nothing open, nothing to rebuild, no conflict
    rec = reconcile(None, view, name=NAME, zone=ZONE, provider="rfc2136", now=T0 + 200)
    assert rec.journal is None and not rec.conflict and not rec.open
    # killed after the finalizing change, before the journal write: taken as finalized
    rec = reconcile(_j("finalizing", final_ttl=300), view, name=NAME, zone=ZONE,
                    provider="rfc2136", now=T0 + 200)
    assert rec.closed == "finalized" and not rec.conflict
    # finalized from another machine: this machine's stale journal is closed
    rec = reconcile(_j("switched", switched_at=T0 + 50), view, name=NAME, zone=ZONE,
                    provider="rfc2136", now=T0 + 200)
    assert rec.closed == "finalized"


def test_a_new_migration_leaves_the_closed_record_and_its_finalize_merges_it() -> None:
    old = _finalized_view(_j("verified"), T0 + 100)
    j2 = replace(_j("lowering"), original_values=("192.0.2.20",), target_values=("192.0.2.30",))
    cs = phases.change_to(j2, ZoneView(old.record, None, old.closed_rr), "lowered", T0 + 300)
    assert old.closed_rr not in cs.deletions  # opening leaves it
    [mk] = [rr for rr in cs.additions if rr.type == "TXT"]
    m = marker.parse(mk)
    assert m is not None and m.phase == "lowered" and m.by == "alice@laptop"
    # rolling back leaves it too
    cs = phases.change_to(j2, ZoneView(old.record, mk, old.closed_rr), "original", T0 + 400)
    assert old.closed_rr not in cs.deletions and mk in cs.deletions
    # finalizing replaces it (exact, as read), the first migration's old value carried over
    j3 = replace(j2, phase="finalizing", final_ttl=300)
    cs = phases.change_to(j3, ZoneView(old.record, mk, old.closed_rr), "finalized", T0 + 500,
                          by="bob@desk")
    assert old.closed_rr in cs.deletions and mk in cs.deletions
    [cl] = [rr for rr in cs.additions if rr.type == "TXT"]
    c = C.parse(cl)
    assert c.from_values == ("192.0.2.10", "192.0.2.20") and c.to_values == ("192.0.2.30",)
    # an earlier record no longer in force is not carried over
    cs = phases.change_to(j3, ZoneView(old.record, mk, old.closed_rr), "finalized",
                          T0 + 100 + 8 * 86400, by="bob@desk")
    [cl] = [rr for rr in cs.additions if rr.type == "TXT"]
    assert C.parse(cl).from_values == ("192.0.2.20",)


def test_a_closed_record_from_the_future_is_refused_and_a_long_one_is_cut_to_the_zones_keep(
        ) -> None:
    c = _closed()
    with pytest.raises(C.ClosedError, match="in the future"):
        C.in_force(c, T0 - C.SKEW - 1, C.DEFAULT_KEEP)
    assert C.in_force(c, T0 - C.SKEW + 1, C.DEFAULT_KEEP)   # clocks differ a little
    assert C.in_force(c, T0 + 86400 - 1, 86400)
    assert not C.in_force(c, T0 + 86400 + C.SLACK, 86400)   # keep 1 day: gone after a day
    assert not C.in_force(c, T0, 0)


def test_the_open_marker_and_the_journal_carry_who_opened_it() -> None:
    j = _j("lowering")
    cs = phases.change_to(j, ZoneView(None, None), "lowered", T0 + 1)
    [mk] = [rr for rr in cs.additions if rr.type == "TXT"]
    assert '"by=alice@laptop"' in mk.values
    m = marker.parse(mk)
    assert m is not None and m.by == "alice@laptop"
    assert phases.from_marker(NAME, ZONE, "rfc2136", m).by == "alice@laptop"
    assert trust.from_json(journal.to_json(j)).by == "alice@laptop"
    bad = rrset(mk.name, "TXT", 60, [v.replace("alice@laptop", "a;b@c") for v in mk.values])
    assert marker.parse(bad) is None
    with pytest.raises(journal.JournalError, match="user@host"):
        trust.from_json(journal.to_json(replace(j, by="x\n@y")))


# --- check (offline) -----------------------------------------------------------------

def _inventory(tmp_path: Path, values: list[str], days: int = 7) -> object:
    doc = {"version": 1, "dns": {"zones": {"example.org": {
        "provider": "route53", "closed_migration_days": days,
        "records": {"api": {"type": "A", "values": values, "ttl": 300}}}}}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    return load_inventory(p)


def test_check_warns_while_the_inventory_still_declares_the_old_value(tmp_path: Path) -> None:
    now = time.time()
    j = _j("finalizing", history=((now - 300, "started"), (now - 120, "closed: finalized")))
    assert closed_at(j) == now - 120
    [f] = check_findings(_inventory(tmp_path, ["192.0.2.10"]), [j], now)
    assert f.severity == "warning" and f.code == "dns-migration-reverted"
    assert "moved 192.0.2.10 -> 192.0.2.20 by alice@laptop 2 minutes ago" in f.message
    assert "192.0.2.20" in f.fix
    assert check_findings(_inventory(tmp_path, ["192.0.2.20"]), [j], now) == []  # updated
    assert check_findings(_inventory(tmp_path, ["192.0.2.10"]), [j], now + 8 * 86400) == []
    assert check_findings(_inventory(tmp_path, ["192.0.2.10"], days=0), [j], now) == []
    rolled = replace(j, history=((now - 120, "closed: rolled back"),))
    assert check_findings(_inventory(tmp_path, ["192.0.2.10"]), [rolled], now) == []
