"""The pure part of `provision import dns`: which served RRsets become inventory records,
why the others are comments, and comments that no served value can break out of."""

from __future__ import annotations

import pytest

from provision.commands.import_dns import _check_round_trip, render
from provision.dns.adopt import FORMS, adopt, comment_text
from provision.dns.rrset import Alias, RRset, rrset
from provision.dnsdata import providers
from provision.dnsdata.rdata import MANAGED_TYPES
from provision.errors import OperationError
from provision.inventory.model import Zone

Z = "example.org."


def rr(name: str, rtype: str, *values: str, ttl: int | None = 300) -> RRset:
    return rrset(name, rtype, ttl, values)


def test_every_managed_type_has_a_form() -> None:
    assert set(FORMS) == set(MANAGED_TYPES)


def test_records_are_written_relative_and_grouped_by_name() -> None:
    got = adopt(Z, [rr("api.example.org.", "A", "192.0.2.2", "192.0.2.1"),
                    rr("api.example.org.", "AAAA", "2001:db8::1", ttl=60),
                    rr("example.org.", "A", "192.0.2.3"),
                    rr("w.example.org.", "CNAME", "LB.example.NET.")], None)
    assert got.records == {
        "@": {"type": "A", "values": ["192.0.2.3"], "ttl": 300},
        "api": [{"type": "A", "values": ["192.0.2.1", "192.0.2.2"], "ttl": 300},
                {"type": "AAAA", "values": ["2001:db8::1"], "ttl": 60}],
        "w": {"type": "CNAME", "value": "lb.example.net", "ttl": 300}}
    assert got.skipped == ()


@pytest.mark.parametrize(("record", "why"), [
    (rr("example.org.", "NS", "ns1.example.net."), "type NS: not one provision manages"),
    (rr("_provision.api.example.org.", "TXT", '"provision owns A"'), "provision's own marker"),
    (rr("_provision-migration.api.example.org.", "TXT", '"phase=lowered"'), "provision's own marker"),
    (RRset("lb.example.org.", "A", None, (), Alias("x.elb.amazonaws.com.", "Z1")), "alias"),
    (rr("a.example.org.", "A", "not-an-ip"), "the provider's answer: "),
    (rr("a.example.org.", "A", "192.0.2.1", ttl=0), "the provider's answer: TTL '0'"),
    (rr("a.example.org.example.org.", "A", "192.0.2.1"), "cannot spell this name"),
    (rr("x" * 60 + ".example.org.", "A", "192.0.2.1"), ""),  # a long label: imported
    (rr(("a" * 60 + ".") * 4 + "example.org.", "A", "192.0.2.1"), "the name: "),
    (rr("_dmarc.example.org.", "A", "192.0.2.1"), ""),  # '_' is allowed
])
def test_what_the_inventory_cannot_declare_is_a_comment(record: RRset, why: str) -> None:
    got = adopt(Z, [record], None)
    if not why:
        assert got.imported == (record,) and got.skipped == ()
        return
    [s] = got.skipped
    assert why in s.why and got.records == {}


def test_a_cname_beside_other_data_and_another_owners_name_are_comments() -> None:
    theirs = RRset("_provision.t.example.org.", "TXT", 300, ('"provision owns A owner=vision"',))
    got = adopt(Z, [rr("w.example.org.", "CNAME", "lb.example.net."),
                    rr("w.example.org.", "A", "192.0.2.1"),
                    rr("t.example.org.", "A", "192.0.2.9"), theirs], "ml-team")
    assert got.records == {"w": {"type": "A", "values": ["192.0.2.1"], "ttl": 300}}
    assert sorted(s.why for s in got.skipped) == [
        "a CNAME beside other records at its name",
        "owner 'vision' manages this name (its marker _provision.t.example.org.)",
        "provision's own marker: not copied"]
    # the same name claimed by this inventory's owner id is imported
    mine = RRset("_provision.t.example.org.", "TXT", 300, ('"provision owns A owner=vision"',))
    assert "t" in adopt(Z, [rr("t.example.org.", "A", "192.0.2.9"), mine], "vision").records


@pytest.mark.parametrize("hostile", ["a\nb: c", "a\rb", "a\u2028b", "a\u2029b", "a\x85b",
                                     "a\x1b[2Jb", "a\u202eb", "\ufeffa", "a\x00b"])
def test_a_comment_is_printable_ascii_whatever_the_zone_holds(hostile: str) -> None:
    text = comment_text(hostile)
    assert all(0x20 <= ord(c) < 0x7F for c in text), text
    got = adopt(Z, [RRset("n.example.org.", "TXT", 300, (f'"{hostile}"',))], None)
    line = got.skipped[0].line(Z)
    assert all(0x20 <= ord(c) < 0x7F for c in line) and line.startswith("n TXT ttl 300")


def test_yaml_that_would_not_declare_what_was_read_is_not_written() -> None:
    """The self-check of `import dns`: the YAML is read back as an inventory and must
    declare exactly the imported RRsets (here a record whose value was altered)."""
    zone = Zone("example.org", "route53", (), providers.settings_model("route53").model_validate({}))
    good = adopt(Z, [rr("api.example.org.", "A", "192.0.2.1")], None)
    _check_round_trip(render(zone, good), zone, good)
    bad = type(good)({"api": {"type": "A", "values": ["192.0.2.9"], "ttl": 300}},
                     good.imported, ())
    with pytest.raises(OperationError, match="would not declare what the zone holds"):
        _check_round_trip(render(zone, bad), zone, bad)
