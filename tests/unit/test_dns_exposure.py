"""`provision check`'s DNS findings: records against the hosts and bastions (offline)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from provision.cli import main
from provision.exposure import findings
from provision.inventory import load_inventory

HEAD = """version: 1
bastions:
  jump: {address: jump.example.org, allow_ssh_from: [203.0.113.0/24], egress: [10.0.0.5/32]}
hosts:
  gpu1: {address: 10.0.1.21, via: jump}
  gpu2: {address: 10.0.1.22, via: jump}
"""


def _inv(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "inv.yml"
    p.write_text(HEAD + text)
    return p


def _codes(p: Path) -> list[tuple[str, str, str]]:
    return [(f.severity, f.code, f.subject) for f in findings(load_inventory(p)) if f.code.startswith("dns-")]


def test_records_of_known_hosts_are_clean(tmp_path: Path) -> None:
    p = _inv(tmp_path, """dns:
  zones:
    example.org:
      provider: route53
      records:
        jump: {type: A, values: [203.0.113.10]}
        gpu1: {type: A, values: [10.0.1.21]}
        www: {type: CNAME, value: lb.example.net}
""")
    assert _codes(p) == []


def test_a_record_pointing_nowhere_is_a_warning_with_its_location(tmp_path: Path) -> None:
    p = _inv(tmp_path, """dns:
  zones:
    example.org:
      provider: route53
      records:
        jump: {type: A, values: [203.0.113.10]}
        old: {type: A, values: [10.0.1.99]}
""")
    assert _codes(p) == [("warning", "dns-unknown-address", "dns/old.example.org")]
    r = CliRunner().invoke(main, ["check", "-i", str(p), "--json"])
    assert r.exit_code == 0, r.output
    f = json.loads(r.output)["findings"][0]
    assert "10.0.1.99" in f["message"] and f["location"].startswith(f"{p}:13:")


def test_a_host_name_the_zone_sends_to_another_host_is_an_error(tmp_path: Path) -> None:
    p = _inv(tmp_path, """dns:
  zones:
    example.org:
      provider: route53
      records:
        jump: {type: CNAME, value: gpu.example.org}
        gpu: {type: A, values: [10.0.1.22]}
""")
    assert ("error", "dns-host-mismatch", "jump") in _codes(p)
    r = CliRunner().invoke(main, ["check", "-i", str(p), "--json"])
    assert r.exit_code == 1, r.output
    assert any("the address of gpu2" in f["message"] for f in json.loads(r.output)["findings"])


def test_a_host_name_without_a_record_in_its_zone_is_a_warning(tmp_path: Path) -> None:
    p = _inv(tmp_path, """dns:
  zones:
    example.org:
      provider: route53
""")
    assert _codes(p) == [("warning", "dns-host-not-in-zone", "jump")]


def test_the_example_inventory_stays_clean() -> None:
    assert findings(load_inventory(Path(__file__).parents[2] / "inventories" / "example.yml")) == ()


def test_a_dual_stack_name_resolves_to_its_host(tmp_path: Path) -> None:
    p = _inv(tmp_path, """dns:
  zones:
    example.org:
      provider: route53
      records:
        jump:
          - {type: A, values: [203.0.113.10]}
          - {type: AAAA, values: ["2001:db8::10"]}
""")
    inv = load_inventory(p)
    assert inv.dns is not None
    assert [(r.name, r.type) for r in inv.dns.zones[0].records] == [("jump", "A"), ("jump", "AAAA")]
    assert _codes(p) == []


def test_check_reads_a_name_spelled_with_its_zone_like_dns_plan(tmp_path: Path) -> None:
    """`jump.example.org` in zone example.org is the name jump.example.org for `check` as
    for `dns plan` (before, check read it as jump.example.org.example.org and missed it)."""
    from provision.dns.rrset import desired

    p = _inv(tmp_path, """dns:
  zones:
    example.org:
      provider: route53
      records:
        jump.example.org: {type: A, values: [10.0.1.22]}
""")
    inv = load_inventory(p)
    assert inv.dns is not None
    assert [rr.name for rr in desired(inv.dns.zones[0])] == ["jump.example.org."]
    assert ("error", "dns-host-mismatch", "jump") in _codes(p)


def test_a_record_pointing_at_a_hosts_public_address_has_a_host(tmp_path: Path) -> None:
    """Issue 39: an A record for a host behind NAT no longer warns "no host has it" once
    the host declares its public_address; another address still does."""
    text = """dns:
  zones:
    example.org:
      provider: route53
      records:
        api: {type: A, values: [198.51.100.7]}
"""
    p = _inv(tmp_path, text)

    def unknown() -> list[tuple[str, str, str]]:
        return [c for c in _codes(p) if c[1] == "dns-unknown-address"]

    assert unknown() == [("warning", "dns-unknown-address", "dns/api.example.org")]
    p.write_text(HEAD.replace("gpu1: {address: 10.0.1.21,",
                              "gpu1: {address: 10.0.1.21, public_address: 198.51.100.7,") + text)
    assert unknown() == []


def test_a_host_name_the_zone_sends_to_another_hosts_public_address_is_an_error(
        tmp_path: Path) -> None:
    # the bastion's name resolves to gpu1's NAT address: SSH and host-key trust for jump
    # would go to gpu1 (before, public addresses counted only for "a record has a host")
    p = tmp_path / "inv.yml"
    p.write_text(HEAD.replace("gpu1: {address: 10.0.1.21, via: jump}",
                              "gpu1: {address: 10.0.1.21, via: jump, public_address: 198.51.100.7}")
                 + """dns:
  zones:
    example.org:
      provider: route53
      records:
        jump: {type: A, values: [198.51.100.7]}
""")
    assert ("error", "dns-host-mismatch", "jump") in _codes(p)
