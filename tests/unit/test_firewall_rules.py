"""Pure tests of the host firewall decisions (no iptables needed)."""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from pathlib import Path

import pytest

from provision.firewall.rules import (
    DOCKER_CHAIN,
    INPUT_CHAIN,
    RenderError,
    Rule,
    Ruleset,
    docker_ruleset,
    host_firewall,
    input_ruleset,
    ssh_sources,
)
from provision.inventory import load_inventory
from provision.inventory.model import Expose, Host, Inventory, Service

FIXTURE = Path(__file__).parent.parent / "fixtures" / "example.yml"


@pytest.fixture(scope="module")
def inv() -> Inventory:
    return load_inventory(FIXTURE)


def _ssh_rules(rs: Ruleset, port: int = 22) -> list[Rule]:
    return [r for r in rs.rules if r.proto == "tcp" and r.dport == port and r.comment == "ssh"]


def _family_of(cidr: str) -> int:
    return ipaddress.ip_network(cidr).version


def _bare_inventory(*nodes: Host) -> Inventory:
    return Inventory(source="t.yml", default_user="root", default_port=22, identity_file=None,
                     known_hosts=None, confirm_timeout=30, team=(),
                     bastions=tuple(n for n in nodes if n.is_bastion),
                     hosts=tuple(n for n in nodes if not n.is_bastion))


def test_host_ssh_sources_are_jump_egress_plus_ssh_from(inv: Inventory) -> None:
    assert ssh_sources(inv, inv.node("gpu1")) == ("10.0.0.0/16", "10.0.0.10/32", "2001:db8:10::10/128")
    assert ssh_sources(inv, inv.node("gpu2")) == ("10.0.0.10/32", "2001:db8:10::10/128")


def test_bastion_ssh_sources_are_allow_ssh_from(inv: Inventory) -> None:
    assert ssh_sources(inv, inv.node("jump")) == ("198.51.100.0/24", "2001:db8:ff::/48")


@pytest.mark.parametrize("name", ["jump", "gpu1", "gpu2"])
def test_ssh_source_always_present_and_split_by_family(inv: Inventory, name: str) -> None:
    fw = host_firewall(inv, inv.node(name))
    for rs in (fw.v4, fw.v6):
        rules = _ssh_rules(rs)
        assert rules, f"{name} v{rs.family}: no ssh rule"
        assert all(r.source and _family_of(r.source) == rs.family for r in rules)
        assert {r.source for r in rules} == {s for s in fw.ssh_sources if _family_of(s) == rs.family}


@pytest.mark.parametrize("name", ["jump", "gpu1", "gpu2"])
def test_accepts_come_before_the_single_final_drop(inv: Inventory, name: str) -> None:
    fw = host_firewall(inv, inv.node(name))
    for rs in (fw.v4, fw.v6):
        last = rs.rules[-1]
        assert (last.target, last.source, last.proto, last.ctstate) == ("DROP", None, None, ())
        catch_all = [i for i, r in enumerate(rs.rules)
                     if r.target == "DROP" and not (r.ctstate or r.source or r.proto)]
        assert catch_all == [len(rs.rules) - 1]
        # the only DROP before the end is the INVALID one, which can never match a new SSH SYN
        early_drops = [r for r in rs.rules[:-1] if r.target == "DROP"]
        assert [r.ctstate for r in early_drops] == [("INVALID",)]


def test_public_service_sources_split_v4_v6(inv: Inventory) -> None:
    fw = host_firewall(inv, inv.node("gpu1"))
    v4 = [r.source for r in fw.v4.rules if r.dport == 8000]
    v6 = [r.source for r in fw.v6.rules if r.dport == 8000]
    assert v4 == ["0.0.0.0/0"]
    assert v6 == ["::/0"]


def test_tunnel_and_none_services_get_no_accept(inv: Inventory) -> None:
    fw = host_firewall(inv, inv.node("gpu2"))  # jupyter (tunnel), mlflow (none)
    ports = {r.dport for r in (*fw.v4.rules, *fw.v6.rules) if r.dport}
    assert ports == {22}


def test_v6_only_source_goes_only_into_v6() -> None:
    svc = Service("api", 9000, "::", Expose("public", ("2001:db8:1::/64",)), "/bin/true", "root")
    host = Host("h", "2001:db8::5", "root", 22, None, (), ssh_from=("2001:db8::/32",), services=(svc,))
    inv = _bare_inventory(host)
    v4 = input_ruleset(inv, host, 4)
    v6 = input_ruleset(inv, host, 6)
    assert [r for r in v4.rules if r.dport] == []
    assert [r.source for r in v6.rules if r.dport == 9000] == ["2001:db8:1::/64"]
    assert [r.source for r in v6.rules if r.dport == 22] == ["2001:db8::/32"]


def test_v6_has_neighbour_discovery_with_hop_limit_255_before_invalid_drop(inv: Inventory) -> None:
    rs = host_firewall(inv, inv.node("gpu1")).v6
    nd = [i for i, r in enumerate(rs.rules) if r.comment.startswith("neighbour discovery")]
    assert len(nd) == 5
    assert all(rs.rules[i].hoplimit == 255 and rs.rules[i].proto == "ipv6-icmp" for i in nd)
    invalid = next(i for i, r in enumerate(rs.rules) if r.ctstate == ("INVALID",))
    assert max(nd) < invalid
    assert any(r.icmp_type == "echo-request" and r.limit for r in rs.rules)


def test_v4_echo_is_rate_limited_and_errors_come_via_related(inv: Inventory) -> None:
    rs = host_firewall(inv, inv.node("gpu1")).v4
    echo = [r for r in rs.rules if r.proto == "icmp"]
    assert [(r.icmp_type, r.limit is not None) for r in echo] == [("echo-request", True)]
    assert any(r.ctstate == ("ESTABLISHED", "RELATED") and r.target == "ACCEPT" for r in rs.rules)


def test_refuses_a_ruleset_without_an_operator_path() -> None:
    host = Host("lonely", "10.9.9.9", "root", 22, None, ())
    inv = _bare_inventory(host)
    with pytest.raises(RenderError, match=r"lonely.*lock the operator out"):
        host_firewall(inv, host)
    fw = host_firewall(inv, host, allow_lockout=True)
    assert _ssh_rules(fw.v4) == [] and _ssh_rules(fw.v6) == []


def test_refuses_a_host_behind_a_bastion_without_egress() -> None:
    bastion = Host("b", "jump.example.org", "root", 22, None, (), is_bastion=True,
                   ssh_from=("198.51.100.0/24",))
    host = Host("h", "10.0.0.5", "root", 22, None, ("b",))
    inv = _bare_inventory(bastion, host)
    with pytest.raises(RenderError, match="'h'"):
        host_firewall(inv, host)
    fixed = replace(bastion, egress=("10.0.0.1/32",))
    inv2 = _bare_inventory(fixed, host)
    assert host_firewall(inv2, host).ssh_sources == ("10.0.0.1/32",)


def test_ssh_rule_uses_the_nodes_ssh_port() -> None:
    host = Host("h", "10.0.0.5", "root", 2222, None, (), ssh_from=("10.0.0.0/8",))
    rs = input_ruleset(_bare_inventory(host), host, 4)
    assert [r.source for r in _ssh_rules(rs, 2222)] == ["10.0.0.0/8"]


def test_only_our_chains_are_used(inv: Inventory) -> None:
    fw = host_firewall(inv, inv.node("gpu1"))
    assert {fw.v4.chain, fw.v6.chain} == {INPUT_CHAIN}
    assert {fw.docker_v4.chain, fw.docker_v6.chain} == {DOCKER_CHAIN}
    assert fw.v4.hook == "INPUT" and fw.docker_v4.hook == "DOCKER-USER"


def test_docker_chain_restricts_published_ports_by_original_port(inv: Inventory) -> None:
    host = inv.node("gpu1")
    rs4 = docker_ruleset(host, 4)
    allowed = [r for r in rs4.rules if r.ctorigdstport]
    assert [(r.ctorigdstport, r.source, r.ctstate, r.target) for r in allowed] == [
        (8000, "0.0.0.0/0", ("DNAT",), "RETURN")]
    assert rs4.rules[-1].target == "DROP" and rs4.rules[-1].ctstate == ("DNAT",)
    assert [r.source for r in docker_ruleset(host, 6).rules if r.ctorigdstport] == ["::/0"]
    # a host without public services: every published port is dropped
    rs = docker_ruleset(inv.node("gpu2"), 4)
    assert [r for r in rs.rules if r.ctorigdstport] == []


def test_sources_are_sorted_and_deduplicated() -> None:
    host = Host("h", "10.0.0.5", "root", 22, None, (),
                ssh_from=("192.168.0.0/16", "10.0.0.0/8", "::1/128", "10.0.0.0/8"))
    assert ssh_sources(_bare_inventory(host), host) == ("10.0.0.0/8", "192.168.0.0/16", "::1/128")
