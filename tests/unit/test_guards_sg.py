"""The security-group lockout guard, proven for both kinds of operator path: through a
bastion (its allow_ssh_from) and straight to a host that has no bastion (its ssh_from, on
its own SSH port). Pure: an inventory file in a temp dir, the live groups as plain data."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from provision.cloud.apply import refuse_lockout as _refuse_lockout
from provision.cloud.rules import (
    LiveGroup,
    LiveRule,
    OperatorPath,
    RuleKey,
    lost_operator_access,
    operator_path,
    plan_groups,
)
from provision.errors import OperationError
from provision.inventory import load_inventory
from provision.inventory.model import Inventory

VPC = "vpc-0abc1234"
OFFICE, HOME, LAB = "203.0.113.0/24", "198.51.100.0/24", "192.0.2.0/24"


def _inv(tmp_path: Path, groups: dict[str, list[dict[str, object]]],
         solo_groups: tuple[str, ...] = ("solo-sg",)) -> Inventory:
    doc = {
        "version": 1,
        "bastions": {"jump": {"address": "198.51.100.10", "allow_ssh_from": [OFFICE],
                              "egress": ["10.0.0.5/32"], "security_groups": ["bastion-sg"]}},
        "hosts": {
            "gpu1": {"address": "10.0.1.21", "via": "jump", "ssh_from": [LAB],
                     "security_groups": ["gpu-sg"]},
            # no bastion: the operator comes straight in, from HOME, on port 2222
            "solo": {"address": "192.0.2.77", "port": 2222, "ssh_from": [HOME, "2001:db8:5::/48"],
                     "security_groups": list(solo_groups)},
        },
        "aws": {"region": "us-east-1", "security_groups": {
            name: {"vpc": VPC, "description": name, "ingress": ingress}
            for name, ingress in groups.items()}},
    }
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    return load_inventory(p)


def _live(name: str, *keys: RuleKey, gid: str = "sg-0a0000000000000a1") -> LiveGroup:
    rules = tuple(LiveRule(f"sgr-{i:017x}", k) for i, k in enumerate(keys))
    return LiveGroup(gid, name, VPC, name, True, rules)


def tcp(port: int, peer: str) -> RuleKey:
    return RuleKey(False, "tcp", port, port, peer)


SOLO_NOW = _live("solo-sg", tcp(2222, HOME), tcp(2222, "2001:db8:5::/48"))
FULL = {"bastion-sg": [{"port": 22, "from": [OFFICE]}],
        "gpu-sg": [{"port": 22, "from": ["bastion-sg"]}],
        "solo-sg": [{"port": 2222, "from": [HOME, "2001:db8:5::/48"]}]}


def test_operator_path_of_a_bastion(tmp_path: Path) -> None:
    inv = _inv(tmp_path, FULL)
    assert operator_path(inv, "bastion-sg") == OperatorPath(
        (OFFICE,), (22,), ("allow_ssh_from of bastion jump",))


def test_operator_path_of_a_host_without_a_bastion(tmp_path: Path) -> None:
    inv = _inv(tmp_path, FULL)
    assert operator_path(inv, "solo-sg") == OperatorPath(
        (HOME, "2001:db8:5::/48"), (22, 2222), ("ssh_from of host solo",))


def test_a_host_behind_a_bastion_is_not_an_operator_path(tmp_path: Path) -> None:
    # gpu1 has ssh_from, but the operator reaches it through the bastion
    assert operator_path(_inv(tmp_path, FULL), "gpu-sg") == OperatorPath((), (22,), ())


def test_a_group_nothing_is_attached_to_stands_for_every_path(tmp_path: Path) -> None:
    groups = {**FULL, "spare-sg": [{"port": 22, "from": [OFFICE]}]}
    path = operator_path(_inv(tmp_path, groups), "spare-sg")
    assert path.cidrs == (OFFICE, HOME, "2001:db8:5::/48") and path.ports == (22, 2222)


def test_shared_sources_are_listed_once(tmp_path: Path) -> None:
    inv = _inv(tmp_path, {**FULL, "shared-sg": [{"port": 22, "from": [OFFICE]}]},
               solo_groups=("solo-sg", "shared-sg"))
    doc = yaml.safe_load((tmp_path / "inv.yml").read_text())
    doc["bastions"]["jump"]["security_groups"].append("shared-sg")
    doc["hosts"]["solo"]["ssh_from"] = [OFFICE, HOME]
    (tmp_path / "inv.yml").write_text(yaml.safe_dump(doc))
    inv = load_inventory(tmp_path / "inv.yml")
    path = operator_path(inv, "shared-sg")
    assert path.cidrs == (OFFICE, HOME)
    assert path.why == ("allow_ssh_from of bastion jump", "ssh_from of host solo")


def test_removing_a_bastionless_hosts_ssh_rule_is_a_lockout(tmp_path: Path) -> None:
    """The case no test caught: the only rule admitting the operator to a host without a
    bastion, on its own port, is dropped from the inventory."""
    inv = _inv(tmp_path, {**FULL, "solo-sg": [{"port": 2222, "from": ["2001:db8:5::/48"]}]})
    plans = {p.name: p for p in plan_groups(inv, [SOLO_NOW])}
    assert plans["solo-sg"].lost_operator_cidrs == (HOME,)
    with pytest.raises(OperationError) as e:
        _refuse_lockout(list(plans.values()), force=False)
    assert str(e.value) == ("refusing to remove the rule admitting the operator's SSH path "
                            f"(solo-sg: {HOME}): the operator would be locked out at the cloud "
                            "layer. Declare a rule that still admits them, or pass --force")
    _refuse_lockout(list(plans.values()), force=True)


def test_a_bastionless_host_keeps_access_through_a_wider_or_split_rule(tmp_path: Path) -> None:
    for ingress in ([{"port": 2222, "from": ["198.51.100.0/23", "2001:db8:5::/48"]}],
                    [{"port": 2222, "from": ["198.51.100.0/25", "198.51.100.128/25",
                                             "2001:db8:5::/48"]}],
                    [{"ports": [2000, 3000], "from": [HOME, "2001:db8:5::/48"]}],
                    [{"protocol": "all", "from": [HOME, "2001:db8:5::/48"]}]):
        inv = _inv(tmp_path, {**FULL, "solo-sg": ingress})
        (plan,) = [p for p in plan_groups(inv, [SOLO_NOW]) if p.name == "solo-sg"]
        assert plan.lost_operator_cidrs == (), ingress
        _refuse_lockout([plan], force=False)


def test_the_host_port_counts_not_only_22(tmp_path: Path) -> None:
    # moving the rule to port 22 leaves sshd on 2222 unreachable
    inv = _inv(tmp_path, {**FULL, "solo-sg": [{"port": 22, "from": [HOME, "2001:db8:5::/48"]}]})
    (plan,) = [p for p in plan_groups(inv, [SOLO_NOW]) if p.name == "solo-sg"]
    assert plan.lost_operator_cidrs == (HOME, "2001:db8:5::/48")


def test_removing_the_bastions_rule_is_a_lockout_and_the_hosts_do_not_hide_it(tmp_path: Path) -> None:
    bastion_now = _live("bastion-sg", tcp(22, OFFICE), gid="sg-0a0000000000000b1")
    inv = _inv(tmp_path, {**FULL, "bastion-sg": [{"port": 22, "from": [LAB]}]})
    plans = {p.name: p for p in plan_groups(inv, [bastion_now, SOLO_NOW])}
    assert plans["bastion-sg"].lost_operator_cidrs == (OFFICE,)
    assert plans["solo-sg"].lost_operator_cidrs == ()
    with pytest.raises(OperationError, match=f"bastion-sg: {OFFICE}"):
        _refuse_lockout(list(plans.values()), force=False)


def test_an_unmanaged_group_is_never_revoked_so_never_a_lockout(tmp_path: Path) -> None:
    foreign = LiveGroup(SOLO_NOW.id, "solo-sg", VPC, "solo-sg", False, SOLO_NOW.rules)
    inv = _inv(tmp_path, {**FULL, "solo-sg": [{"port": 2222, "from": ["2001:db8:5::/48"]}]})
    (plan,) = [p for p in plan_groups(inv, [foreign]) if p.name == "solo-sg"]
    assert plan.revoke == () and plan.lost_operator_cidrs == ()
    assert [r.key for r in plan.drift] == [tcp(2222, HOME)]


def test_lost_access_per_port_and_egress_never_counts() -> None:
    ssh22, ssh2222 = tcp(22, HOME), tcp(2222, HOME)
    current = [LiveRule("a", ssh22), LiveRule("b", ssh2222)]
    # revoking 2222 loses HOME on 2222, even though 22 still admits it
    assert lost_operator_access(current, [current[1]], [], [HOME], (22, 2222)) == (HOME,)
    assert lost_operator_access(current, [current[1]], [], [HOME], (22,)) == ()
    # an egress rule admits nothing
    out = RuleKey(True, "tcp", 2222, 2222, HOME)
    assert lost_operator_access(current, [current[1]], [(out, "")], [HOME], (2222,)) == (HOME,)
    eg = [LiveRule("e", out)]
    assert lost_operator_access(eg, [], [], [HOME], (2222,)) == ()
    # listed once however many ports lose it
    assert lost_operator_access(current, current, [], [HOME], (22, 2222)) == (HOME,)
    # a group reference is not a CIDR that admits the operator
    grp = [(RuleKey(False, "tcp", 22, 22, "sg-0123456789abcdef0"), "")]
    assert lost_operator_access(current[:1], current[:1], grp, [HOME], (22,)) == (HOME,)
    # a wider source covers; a narrower one does not
    assert lost_operator_access(current[:1], current[:1], [(tcp(22, "198.0.0.0/8"), "")],
                                [HOME], (22,)) == ()
    assert lost_operator_access(current[:1], current[:1], [(tcp(22, "198.51.100.0/25"), "")],
                                [HOME], (22,)) == (HOME,)
    # families do not cover each other
    assert lost_operator_access(current[:1], current[:1], [(tcp(22, "::/0"), "")],
                                [HOME], (22,)) == (HOME,)


def test_each_group_is_judged_by_its_own_operator_path(tmp_path: Path) -> None:
    """A rule admitting HOME on 2222 in the bastion's group is not the operator's path (HOME
    on 2222 goes to solo, which is not in that group): removing it is not a lockout."""
    bastion_now = _live("bastion-sg", tcp(22, OFFICE), tcp(2222, HOME), gid="sg-0a0000000000000b1")
    plans = {p.name: p for p in plan_groups(_inv(tmp_path, FULL), [bastion_now, SOLO_NOW])}
    assert [r.key for r in plans["bastion-sg"].revoke] == [tcp(2222, HOME)]
    assert plans["bastion-sg"].lost_operator_cidrs == ()


def test_plans_for_new_missing_and_existing_groups(tmp_path: Path) -> None:
    from provision.cloud.rules import reconcile

    inv = _inv(tmp_path, {**FULL, "solo-sg": [
        {"port": 2222, "from": ["2001:db8:5::/48", HOME]}, {"port": 80, "from": [HOME]},
        {"protocol": "udp", "ports": [60000, 61000], "from": [HOME]}]})
    assert inv.aws is not None
    groups = {g.name: g for g in inv.aws.security_groups}
    new = reconcile(groups["solo-sg"], None, {})
    assert (new.name, new.group_id, new.vpc, new.description, new.managed, new.error) == (
        "solo-sg", None, VPC, "solo-sg", True, "")
    assert new.revoke == () and new.lost_operator_cidrs == ()
    assert [k for k, _ in new.authorize] == [tcp(80, HOME), tcp(2222, HOME),
                                            tcp(2222, "2001:db8:5::/48"),
                                            RuleKey(False, "udp", 60000, 61000, HOME)]
    missing = reconcile(dataclasses.replace(groups["solo-sg"], id="sg-0123456789abcdef0"), None, {})
    assert (missing.name, missing.group_id, missing.vpc, missing.description, missing.managed) == (
        "solo-sg", "sg-0123456789abcdef0", VPC, "solo-sg", False)
    assert missing.error == ("security group sg-0123456789abcdef0 does not exist (declared as "
                             "an existing group)")
    existing = reconcile(groups["solo-sg"], SOLO_NOW, {})
    assert (existing.group_id, existing.vpc, existing.description, existing.managed) == (
        SOLO_NOW.id, VPC, "solo-sg", True)
    by_id = reconcile(dataclasses.replace(groups["solo-sg"], id=SOLO_NOW.id, vpc=None), SOLO_NOW, {})
    assert by_id.vpc == VPC
