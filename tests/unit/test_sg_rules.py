"""The pure security-group reconcile, fed with describe outputs stored as JSON fixtures."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pytest

from provision.cloud import aws as shell
from provision.cloud.rules import (
    DEFAULT_EGRESS,
    LiveGroup,
    LiveRule,
    RuleKey,
    described_rule,
    ip_permission,
    live_groups,
    lost_operator_access,
    operator_path,
    plan_groups,
    rule_request,
    rule_text,
)
from provision.errors import OperationError
from provision.inventory import load_inventory
from provision.inventory.model import Inventory

FIX = Path(__file__).parents[1] / "fixtures" / "sg"
BASTION, GPU, LEGACY = "sg-0a00000000000000a", "sg-0b00000000000000b", "sg-0f00000000000000c"


def load(name: str) -> Any:
    return json.loads((FIX / name).read_text())


@pytest.fixture
def inv() -> Inventory:
    return load_inventory(FIX / "inventory.yml")


def described() -> list[LiveGroup]:
    return live_groups(load("groups.json")["SecurityGroups"], load("rules.json")["SecurityGroupRules"])


def by_name(plans: list[Any]) -> dict[str, Any]:
    return {p.name: p for p in plans}


def rule(rule_id: str) -> dict[str, Any]:
    return next(r for r in load("rules.json")["SecurityGroupRules"] if r["SecurityGroupRuleId"] == rule_id)


@pytest.mark.parametrize(("rule_id", "key"), [
    ("sgr-000000000000000a2", RuleKey(False, "tcp", 22, 22, "2001:db8:100::/48")),  # "6", IPv6 upper case
    ("sgr-000000000000000a3", RuleKey(True, "all", -1, -1, "0.0.0.0/0")),
    ("sgr-000000000000000b3", RuleKey(False, "tcp", 443, 443, "::/0")),  # 0:0:...:0/0 compressed
    ("sgr-000000000000000b4", RuleKey(False, "udp", 60000, 61000, "203.0.113.0/24")),  # "17"
    ("sgr-000000000000000b5", RuleKey(False, "all", -1, -1, "10.1.0.0/16")),  # "all", no ports at all
    ("sgr-000000000000000b7", RuleKey(False, "icmpv6", -1, -1, "2001:db8:100::/48")),  # "58"
    ("sgr-000000000000000b8", RuleKey(False, "tcp", 0, 65535, "192.0.2.0/24")),  # tcp -1/-1 = all ports
    ("sgr-000000000000000b9", RuleKey(False, "all", -1, -1, "10.0.0.0/8")),  # "-1"
    ("sgr-000000000000000b1", RuleKey(False, "tcp", 22, 22, BASTION)),  # group reference by id
    ("sgr-000000000000000c2", RuleKey(False, "tcp", 80, 80, "pl-0123456789abcdef0")),
])
def test_described_rules_are_spelled_one_way(rule_id: str, key: RuleKey) -> None:
    assert described_rule(rule(rule_id)).key == key


def test_group_pair_description_comes_from_the_group_view() -> None:
    gpu = next(g for g in described() if g.id == GPU)
    ref = next(r for r in gpu.rules if r.key.peer == BASTION)
    assert ref.description == "ssh from the bastion"  # absent from the rule view (moto drops it)


def test_managed_is_the_tag() -> None:
    assert {g.id: g.managed for g in described()} == {BASTION: True, GPU: True, LEGACY: False}


def test_reconcile_against_fixture(inv: Inventory) -> None:
    plans = by_name(plan_groups(inv, described()))
    bastion, gpu, legacy = plans["bastion-sg"], plans["gpu-servers"], plans["legacy"]

    assert not bastion.has_changes  # differently spelled but equal: no perpetual diff
    assert [r.id for r in gpu.revoke] == ["sgr-000000000000000b9", "sgr-000000000000000b8"]
    assert gpu.authorize == ((RuleKey(False, "tcp", 8000, 8000, "10.0.0.0/8"), "model api"),)
    assert [(r.id, d) for r, d in gpu.redescribe] == [("sgr-000000000000000b3", "https")]
    assert gpu.drift == ()
    # a foreign (untagged) group found by id: ours added, theirs reported, never revoked
    assert legacy.group_id == LEGACY and not legacy.managed
    assert legacy.revoke == ()
    assert [r.id for r in legacy.drift] == ["sgr-000000000000000c2", "sgr-000000000000000c1"]  # by port
    assert legacy.authorize == ((RuleKey(False, "tcp", 80, 80, "10.0.0.0/8"), ""),)
    assert all(not p.lost_operator_cidrs for p in plans.values())


def test_egress_left_alone_unless_declared(inv: Inventory) -> None:
    plans = plan_groups(inv, described())
    assert not any(r.key.egress for p in plans for r in p.revoke)
    assert not any(k.egress for p in plans for k, _ in p.authorize)


def test_converged_state_plans_nothing(inv: Inventory) -> None:
    """Apply the fixture plan to the described state by hand: the next plan is empty."""
    groups = described()
    plans = by_name(plan_groups(inv, groups))
    fixed = []
    for g in groups:
        p = next(p for p in plans.values() if p.group_id == g.id)
        gone = {r.id for r in p.revoke}
        newdesc = {r.id: d for r, d in p.redescribe}
        rules = [dataclasses.replace(r, description=newdesc.get(r.id, r.description))
                 for r in g.rules if r.id not in gone]
        rules += [LiveRule(f"sgr-new{i}", k, d) for i, (k, d) in enumerate(p.authorize)]
        fixed.append(dataclasses.replace(g, rules=tuple(rules)))
    again = plan_groups(inv, fixed)
    assert not any(p.has_changes for p in again)


def test_order_of_described_rules_does_not_matter(inv: Inventory) -> None:
    rules = load("rules.json")["SecurityGroupRules"]
    expected = plan_groups(inv, described())
    for seed in range(5):
        shuffled = rules[:]
        random.Random(seed).shuffle(shuffled)
        groups = load("groups.json")["SecurityGroups"][::-1]
        assert plan_groups(inv, live_groups(groups, shuffled)) == expected


def test_new_group_has_the_default_egress_and_pending_references(inv: Inventory) -> None:
    plans = by_name(plan_groups(inv, []))
    gpu = plans["gpu-servers"]
    assert gpu.create and gpu.group_id is None
    assert RuleKey(False, "tcp", 22, 22, "sg:bastion-sg") in [k for k, _ in gpu.authorize]
    assert plans["legacy"].error.startswith("security group sg-0f00000000000000c does not exist")
    assert DEFAULT_EGRESS not in [r.key for r in gpu.revoke]  # egress not declared


def test_removing_the_operator_rule_is_flagged(inv: Inventory) -> None:
    assert inv.aws is not None
    bastion = inv.aws.security_groups[0]
    only_v6 = dataclasses.replace(bastion, ingress=(dataclasses.replace(
        bastion.ingress[0], sources=("2001:db8:100::/48",)),))
    inv2 = dataclasses.replace(inv, aws=dataclasses.replace(
        inv.aws, security_groups=(only_v6, *inv.aws.security_groups[1:])))
    plans = by_name(plan_groups(inv2, described()))
    assert plans["bastion-sg"].lost_operator_cidrs == ("203.0.113.0/24",)
    assert [r.id for r in plans["bastion-sg"].revoke] == ["sgr-000000000000000a1"]


def test_lockout_counts_the_union_of_what_remains() -> None:
    office = RuleKey(False, "tcp", 22, 22, "203.0.113.0/24")
    current = [LiveRule("r1", office)]
    halves = [(RuleKey(False, "tcp", 22, 22, "203.0.113.0/25"), ""),
              (RuleKey(False, "tcp", 22, 22, "203.0.113.128/25"), "")]
    assert lost_operator_access(current, current, halves, ["203.0.113.0/24"]) == ()
    assert lost_operator_access(current, current, halves[:1], ["203.0.113.0/24"]) == ("203.0.113.0/24",)
    everything = [(RuleKey(False, "all", -1, -1, "0.0.0.0/0"), "")]
    assert lost_operator_access(current, current, everything, ["203.0.113.0/24"]) == ()
    wrong_port = [(RuleKey(False, "tcp", 2222, 2222, "203.0.113.0/24"), "")]
    assert lost_operator_access(current, current, wrong_port, ["203.0.113.0/24"]) == ("203.0.113.0/24",)
    # a source that was never admitted cannot be lost
    assert lost_operator_access([], [], [], ["203.0.113.0/24"]) == ()


def test_operator_path_is_bastions_and_bastionless_hosts(inv: Inventory) -> None:
    assert operator_path(inv, "bastion-sg").cidrs == ("203.0.113.0/24", "2001:db8:100::/48")
    assert operator_path(inv, "gpu-servers").cidrs == ()  # gpu1 is reached through the bastion


def test_paging_makes_one_call_per_page(inv: Inventory) -> None:
    class Stub:
        def __init__(self) -> None:
            self.calls: list[tuple[str, Any]] = []

        def describe_security_groups(self, **kw: Any) -> Any:
            self.calls.append(("groups", kw))
            return load("pages/groups-2.json" if kw.get("NextToken") == "groups-2" else "pages/groups-1.json")

        def describe_security_group_rules(self, **kw: Any) -> Any:
            self.calls.append(("rules", kw))
            return load({None: "pages/rules-1.json", "token-2": "pages/rules-2.json",
                         "token-3": "pages/rules-3.json"}[kw.get("NextToken")])

    assert inv.aws is not None
    stub = Stub()
    groups = shell.fetch(stub, inv.aws.security_groups)
    assert [c[0] for c in stub.calls] == ["groups", "groups", "rules", "rules", "rules"]
    rule_filter = stub.calls[2][1]["Filters"]
    assert rule_filter == [{"Name": "group-id", "Values": sorted([BASTION, GPU, LEGACY])}]
    assert plan_groups(inv, groups) == plan_groups(inv, described())


def test_api_shapes() -> None:
    assert ip_permission(RuleKey(False, "all", -1, -1, "10.0.0.0/8"), "") == {
        "IpProtocol": "-1", "IpRanges": [{"CidrIp": "10.0.0.0/8"}]}
    assert ip_permission(RuleKey(False, "udp", 1000, 2000, "::/0"), "x") == {
        "IpProtocol": "udp", "FromPort": 1000, "ToPort": 2000, "Ipv6Ranges": [{"CidrIpv6": "::/0", "Description": "x"}]}
    assert ip_permission(RuleKey(False, "tcp", 22, 22, BASTION), "b")["UserIdGroupPairs"] == [
        {"GroupId": BASTION, "Description": "b"}]
    with pytest.raises(ValueError, match="no id yet"):
        ip_permission(RuleKey(False, "tcp", 22, 22, "sg:new"), "")
    assert rule_request(RuleKey(False, "tcp", 22, 22, BASTION), "d")["ReferencedGroupId"] == BASTION


@pytest.mark.parametrize(("key", "text"), [
    (RuleKey(False, "all", -1, -1, "10.0.0.0/8"), "ingress all traffic from 10.0.0.0/8"),
    (RuleKey(False, "tcp", 0, 65535, "10.0.0.0/8"), "ingress tcp all ports from 10.0.0.0/8"),
    (RuleKey(False, "udp", 5, 9, "::/0"), "ingress udp 5-9 from ::/0"),
    (RuleKey(True, "icmp", -1, -1, "10.0.0.0/8"), "egress icmp (all types) to 10.0.0.0/8"),
    (RuleKey(False, "tcp", 22, 22, BASTION), f"ingress tcp 22 from group bastion-sg ({BASTION})"),
    (RuleKey(False, "tcp", 22, 22, "sg:web"), "ingress tcp 22 from group web (to be created)"),
])
def test_rule_text(key: RuleKey, text: str) -> None:
    assert rule_text(key, {BASTION: "bastion-sg"}) == text


def test_an_answer_that_is_not_a_rule_is_refused_naming_it(inv: Inventory) -> None:
    """`sg plan` on an answer whose CIDR is not one (an endpoint that is not AWS): exit 1
    naming the rule and the group, not a ValueError traceback."""
    class Stub:
        def describe_security_groups(self, **kw: Any) -> Any:
            return load("groups.json")

        def describe_security_group_rules(self, **kw: Any) -> Any:
            rules = load("rules.json")["SecurityGroupRules"]
            rules[0] = {**rules[0], "CidrIpv4": "10.0.0.0/33"}
            return {"SecurityGroupRules": rules}

    assert inv.aws is not None
    with pytest.raises(OperationError, match=r"AWS answered a security group rule that cannot be read: "
                       r"rule sgr-000000000000000a1 of group sg-0a00000000000000a: '10\.0\.0\.0/33'"):
        shell.fetch(Stub(), inv.aws.security_groups)
