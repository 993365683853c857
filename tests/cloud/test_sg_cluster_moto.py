"""A cluster's security group rules (`cloud/cluster_rules.py`) through `sg plan|apply`,
against moto on 127.0.0.1: the all-traffic rule from the group itself, EFA's egress rule to
itself, and a second plan with nothing to do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .test_sg_moto import OFFICE, apply, ec2, groups_by_name, plan, rules_of


def training(tmp_path: Path, vpc: str, *, efa: bool = False, egress: list[Any] | None = None,
             ingress: list[Any] | None = None) -> Path:
    """The AWS training pattern: node1 and node2 behind a bastion, both in group `train`,
    and cluster `train` naming that group."""
    train: dict[str, Any] = {"vpc": vpc, "description": "training nodes", "ingress": ingress or [
        {"port": 22, "from": ["bastion-sg"], "description": "ssh from the bastion"}]}
    if egress is not None:
        train["egress"] = egress
    doc: dict[str, Any] = {
        "version": 1,
        "bastions": {"jump": {"address": "198.51.100.10", "allow_ssh_from": [OFFICE],
                              "egress": ["10.0.0.5/32"], "security_groups": ["bastion-sg"]}},
        "hosts": {n: {"address": a, "via": "jump", "security_groups": ["train"]}
                  for n, a in (("node1", "10.0.1.21"), ("node2", "10.0.1.22"))},
        "aws": {"region": "us-east-1", "security_groups": {
            "bastion-sg": {"vpc": vpc, "ingress": [{"port": 22, "from": [OFFICE]}]},
            "train": train}},
        "clusters": {"train": {"hosts": ["node1", "node2"], "security_group": "train",
                               **({"efa": True} if efa else {})}},
    }
    path = tmp_path / "inv.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def self_rules(gid: str, egress: bool) -> list[dict[str, Any]]:
    return [r for r in rules_of(gid, egress)
            if r.get("ReferencedGroupInfo", {}).get("GroupId") == gid]


def test_the_self_rule_is_created_and_shown_as_the_clusters(vpc: str, tmp_path: Path) -> None:
    inv = training(tmp_path, vpc)
    first = plan(inv)
    assert first.exit_code == 3, first.output
    assert ("+ ingress all traffic from group train (to be created)  "
            "# cluster train: its members admit each other") in first.output
    assert "+ egress" not in first.output
    done = apply(inv)
    assert done.exit_code == 0, done.output
    gid = groups_by_name()["train"]["GroupId"]
    [rule] = self_rules(gid, egress=False)
    assert rule["IpProtocol"] == "-1"
    assert self_rules(gid, egress=True) == []  # no EFA: no egress rule to itself
    # the AWS default egress stays (the inventory leaves egress out)
    assert [r.get("CidrIpv4") for r in rules_of(gid, egress=True)] == ["0.0.0.0/0"]
    again = plan(inv)
    assert again.exit_code == 0, again.output
    assert "No changes." in again.output


def test_efa_adds_the_egress_rule_to_itself(vpc: str, tmp_path: Path) -> None:
    inv = training(tmp_path, vpc, efa=True)
    first = plan(inv)
    assert first.exit_code == 3, first.output
    assert ("+ egress all traffic to group train (to be created)  "
            "# cluster train: EFA, all traffic to its members") in first.output
    assert apply(inv).exit_code == 0
    gid = groups_by_name()["train"]["GroupId"]
    assert [r["IpProtocol"] for r in self_rules(gid, egress=True)] == ["-1"]
    assert [r["IpProtocol"] for r in self_rules(gid, egress=False)] == ["-1"]
    # egress is not managed: the default all-out rule is neither revoked nor wanted
    assert sorted(str(r.get("CidrIpv4")) for r in rules_of(gid, egress=True)) == ["0.0.0.0/0", "None"]
    again = plan(inv)
    assert again.exit_code == 0 and "No changes." in again.output, again.output


def test_efa_with_managed_egress_keeps_the_self_rule(vpc: str, tmp_path: Path) -> None:
    # egress declared (managed): the declared rules and the implied one, nothing else
    inv = training(tmp_path, vpc, efa=True, egress=[{"port": 443, "to": ["0.0.0.0/0"]}])
    assert apply(inv).exit_code == 0
    gid = groups_by_name()["train"]["GroupId"]
    out = sorted((r["IpProtocol"], r.get("CidrIpv4") or r["ReferencedGroupInfo"]["GroupId"])
                 for r in rules_of(gid, egress=True))
    assert out == sorted([("-1", gid), ("tcp", "0.0.0.0/0")])
    again = plan(inv)
    assert again.exit_code == 0 and "No changes." in again.output, again.output


def test_a_missing_self_rule_is_named_and_put_back(vpc: str, tmp_path: Path) -> None:
    inv = training(tmp_path, vpc, efa=True)
    assert apply(inv).exit_code == 0
    gid = groups_by_name()["train"]["GroupId"]
    [rule] = self_rules(gid, egress=False)
    ec2().revoke_security_group_ingress(GroupId=gid, SecurityGroupRuleIds=[rule["SecurityGroupRuleId"]])
    result = plan(inv)
    assert result.exit_code == 3, result.output
    assert (f"+ ingress all traffic from group train ({gid})  "
            "# cluster train: its members admit each other") in result.output
    assert "Plan: 1 to add, 0 to change, 0 to destroy." in result.output
    assert apply(inv).exit_code == 0
    assert len(self_rules(gid, egress=False)) == 1


def test_a_declared_self_rule_is_the_same_rule(vpc: str, tmp_path: Path) -> None:
    # the inventory spells the rule itself: one rule, its own description
    inv = training(tmp_path, vpc, ingress=[
        {"port": 22, "from": ["bastion-sg"]},
        {"protocol": "all", "from": ["train"], "description": "training traffic"}])
    result = plan(inv)
    assert "from group train (to be created)  # training traffic" in result.output, result.output
    assert "cluster train" not in result.output
    assert apply(inv).exit_code == 0
    gid = groups_by_name()["train"]["GroupId"]
    assert len(self_rules(gid, egress=False)) == 1
    assert plan(inv).exit_code == 0
