"""The cloud half of clusters, pure: the rules a cluster implies in its security group, the
reconcile with them, and what `check` says about a cluster's members at the cloud layer."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from provision.cli import main
from provision.cloud import cluster_rules
from provision.cloud.attach import AttachPlan, LiveInstance
from provision.cloud.placement import LivePlacement, Outside, plan_placements
from provision.cloud.rules import DEFAULT_EGRESS, LiveGroup, LiveRule, RuleKey, plan_groups
from provision.exposure import findings
from provision.exposure.join import declared_sg_rules
from provision.inventory import load_inventory
from provision.inventory.model import Inventory

OFFICE = "203.0.113.0/24"
VPC = "vpc-0abc1234"

PATTERN: dict[str, Any] = {
    "version": 1,
    "bastions": {"jump": {"address": "198.51.100.10", "allow_ssh_from": [OFFICE],
                          "egress": ["10.0.0.5/32"], "security_groups": ["bastion-sg"]}},
    "hosts": {"node1": {"address": "10.0.1.21", "via": "jump", "security_groups": ["train"]},
              "node2": {"address": "10.0.1.22", "via": "jump", "security_groups": ["train"]}},
    "aws": {"region": "us-east-1", "security_groups": {
        "bastion-sg": {"vpc": VPC, "ingress": [{"port": 22, "from": [OFFICE]}]},
        "train": {"vpc": VPC, "ingress": [{"port": 22, "from": ["bastion-sg"]},
                                          {"protocol": "all", "from": ["train"]}]}}},
    "clusters": {"train": {"hosts": ["node1", "node2"], "security_group": "train"}},
}


def doc() -> dict[str, Any]:
    return copy.deepcopy(PATTERN)


def load(tmp_path: Path, d: dict[str, Any]) -> Inventory:
    path = tmp_path / "inv.yml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return load_inventory(str(path))


def codes(inv: Inventory) -> list[tuple[str, str, str]]:
    return sorted((f.severity, f.code, f.subject) for f in findings(inv))


# --- the rules a cluster implies -------------------------------------------------------------

def test_a_cluster_implies_the_rule_from_itself_and_efa_the_egress(tmp_path: Path) -> None:
    d = doc()
    d["clusters"]["train"]["efa"] = True
    d["aws"]["security_groups"]["train"]["ingress"] = [{"port": 22, "from": ["bastion-sg"]}]
    inv = load(tmp_path, d)
    train = inv.aws.security_groups[1] if inv.aws else None
    assert train is not None and train.name == "train"
    extra = cluster_rules.extra(inv, train)
    assert [(i.egress, i.rule.protocol, i.rule.sources) for i in extra] == [
        (False, "all", ("train",)), (True, "all", ("train",))]
    assert cluster_rules.field_of(inv, train, 1) == "clusters.train.security_group"
    assert cluster_rules.field_of(inv, train, 0) == "aws.security_groups.train.ingress[0]"


def test_a_declared_rule_is_not_implied_twice(tmp_path: Path) -> None:
    inv = load(tmp_path, doc())  # the pattern declares {protocol: all, from: [train]} itself
    assert inv.aws is not None
    train = inv.aws.security_groups[1]
    assert cluster_rules.extra(inv, train) == ()
    assert cluster_rules.ingress(inv, train) == train.ingress


def test_two_clusters_in_one_group_imply_one_rule(tmp_path: Path) -> None:
    d2 = doc()
    d2["aws"]["security_groups"]["train"]["ingress"].pop()
    d2["clusters"]["eval"] = {"hosts": ["node1"], "security_group": "train"}
    inv2 = load(tmp_path, d2)
    assert inv2.aws is not None
    [one] = cluster_rules.extra(inv2, inv2.aws.security_groups[1])
    assert one.cluster == "eval"  # by name: the first cluster's description


def live_train(rules: tuple[LiveRule, ...]) -> LiveGroup:
    return LiveGroup("sg-0000000000000train", "train", VPC, "managed by provision", True, rules)


def test_the_implied_egress_rule_in_an_unmanaged_egress_is_compared_alone(tmp_path: Path) -> None:
    d = doc()
    d["clusters"]["train"]["efa"] = True
    inv = load(tmp_path, d)
    gid = "sg-0000000000000train"
    bastion = LiveGroup("sg-00000000000bastion", "bastion-sg", VPC, "managed by provision", True)
    ingress = (LiveRule("sgr-1", RuleKey(False, "tcp", 22, 22, bastion.id)),
               LiveRule("sgr-2", RuleKey(False, "all", -1, -1, gid)))
    default = LiveRule("sgr-3", DEFAULT_EGRESS)
    other = LiveRule("sgr-4", RuleKey(True, "tcp", 443, 443, "0.0.0.0/0"))
    # missing: authorized, and nothing else of the unmanaged egress is touched
    [_, train] = plan_groups(inv, [bastion, live_train((*ingress, default, other))])
    assert [k for k, _ in train.authorize] == [RuleKey(True, "all", -1, -1, gid)]
    assert train.authorize[0][1] == "cluster train: EFA, all traffic to its members"
    assert train.revoke == () and train.redescribe == ()
    # there: no change
    have = LiveRule("sgr-5", RuleKey(True, "all", -1, -1, gid), "cluster train: EFA, all traffic to its members")
    [_, again] = plan_groups(inv, [bastion, live_train((*ingress, default, other, have))])
    assert not again.has_changes


# --- check on the training pattern --------------------------------------------------------

def test_the_aws_training_pattern_is_a_clean_check(tmp_path: Path) -> None:
    path = tmp_path / "inv.yml"
    path.write_text(yaml.safe_dump(doc(), sort_keys=False))
    result = CliRunner().invoke(main, ["check", "-i", str(path)])
    assert result.exit_code == 0, result.output
    assert "no findings" in result.output


def test_the_pattern_without_the_cluster_names_the_peers_dropped(tmp_path: Path) -> None:
    d = doc()
    del d["clusters"]
    found = [f for f in findings(load(tmp_path, d)) if f.subject == "node1"]
    assert [(f.severity, f.code) for f in found] == [("warning", "sg-peer-outside-cluster")]
    assert "node1's firewall drops it: node1 shares no cluster with node2" in found[0].message
    assert found[0].field == "aws.security_groups.train.ingress[1]"


def test_a_group_machine_outside_the_cluster_is_named(tmp_path: Path) -> None:
    d = doc()
    d["hosts"]["node3"] = {"address": "10.0.1.23", "via": "jump", "security_groups": ["train"]}
    found = {f.subject: f for f in findings(load(tmp_path, d)) if f.code == "sg-peer-outside-cluster"}
    assert sorted(found) == ["node1", "node2", "node3"]
    assert "holds node3, but node1's firewall drops it" in found["node1"].message
    assert "(its cluster peers there: node2)" in found["node1"].message
    assert "holds node1, node2, but node3's firewall drops them" in found["node3"].message


def test_the_implied_rule_is_judged_too(tmp_path: Path) -> None:
    # the group declares only SSH; the cluster's rule makes it admit the members: clean
    d = doc()
    d["aws"]["security_groups"]["train"]["ingress"].pop()
    inv = load(tmp_path, d)
    assert codes(inv) == []
    # and audit --no-aws joins the implied rule as the declared groups
    rules = declared_sg_rules(inv, inv.node("node1")) or ()
    assert any(r.protocol == "all" and r.peer == "train" for r in rules)


def test_members_whose_groups_drop_each_other_are_an_error(tmp_path: Path) -> None:
    d = doc()
    d["aws"]["security_groups"]["train"]["ingress"] = [
        {"port": 22, "from": ["bastion-sg"]}, {"port": 29500, "from": ["train"]}]
    del d["clusters"]["train"]["security_group"]
    d["clusters"]["train"]["ports"] = ["40000-40999"]
    d["clusters"]["train"]["protocols"] = ["tcp"]
    found = [f for f in findings(load(tmp_path, d)) if f.code == "cluster-sg-drops-members"]
    assert [(f.severity, f.subject) for f in found] == [("error", "node1"), ("error", "node2")]
    assert "drop tcp 40000-40999 from node2" in found[0].message  # 29500 is admitted
    assert "29500" not in found[0].message
    assert found[0].field == "clusters.train.hosts"


def test_a_cidr_rule_covering_the_members_admits_them(tmp_path: Path) -> None:
    d = doc()
    d["aws"]["security_groups"]["train"]["ingress"] = [
        {"port": 22, "from": ["bastion-sg"]}, {"protocol": "all", "from": ["10.0.1.0/24"]}]
    del d["clusters"]["train"]["security_group"]
    assert not [f for f in findings(load(tmp_path, d)) if f.code == "cluster-sg-drops-members"]
    d["aws"]["security_groups"]["train"]["ingress"][1]["from"] = ["10.0.1.21/32"]
    found = [f for f in findings(load(tmp_path, d)) if f.code == "cluster-sg-drops-members"]
    # the rule admits node1's own address only: node1's groups drop node2, not the reverse
    assert [f.subject for f in found] == ["node1"]
    assert "from node2" in found[0].message


def test_a_loopback_tunnel_service_on_a_member_is_not_exposed_by_the_cluster(tmp_path: Path) -> None:
    d = doc()
    d["hosts"]["node1"]["services"] = {"jupyter": {}}
    assert "sg-admits-tunnel-service" not in {c for _, c, _ in codes(load(tmp_path, d))}
    d["hosts"]["node1"]["services"] = {"jupyter": {"bind": "0.0.0.0"}}
    assert ("error", "sg-admits-tunnel-service", "node1/jupyter") in codes(load(tmp_path, d))


def test_members_behind_different_bastions_cross_sites(tmp_path: Path) -> None:
    d = doc()
    d["bastions"]["jump2"] = {"address": "198.51.100.11", "allow_ssh_from": [OFFICE],
                              "egress": ["10.1.0.5/32"], "security_groups": ["bastion-sg"]}
    d["hosts"]["node2"]["via"] = "jump2"
    found = [f for f in findings(load(tmp_path, d)) if f.code == "cluster-crosses-sites"]
    assert [(f.severity, f.subject, f.field) for f in found] == [
        ("warning", "cluster train", "clusters.train.hosts")]
    assert "node1 behind jump; node2 behind jump2" in found[0].message
    assert codes(load(tmp_path, doc())) == []  # one bastion: nothing


# --- placement groups ----------------------------------------------------------------------

def placed(tmp_path: Path, **clusters: dict[str, Any]) -> Inventory:
    d = doc()
    for n in ("node1", "node2"):
        d["hosts"][n]["aws"] = {}
    d["clusters"]["train"]["placement_group"] = "train-pg"
    d["clusters"].update(clusters)
    return load(tmp_path, d)


def live(name: str, pg: str) -> tuple[LiveInstance, AttachPlan]:
    i = LiveInstance(f"i-{name}", VPC, "", "eni-1", (), "running", (), pg)
    return i, AttachPlan(name, i.id, "eni-1", (), ())


def test_placement_decisions(tmp_path: Path) -> None:
    inv = placed(tmp_path)
    (i1, a1), (i2, a2) = live("node1", "train-pg"), live("node2", "")
    [p] = plan_placements(inv, [], [i1, i2], [a1, a2])
    assert (p.create, p.error) == (True, "")
    assert p.outside == (Outside("node2", "i-node2", ""),)  # node1 is in it already
    there = LivePlacement("train-pg", "cluster", "available")
    [p] = plan_placements(inv, [there], [i1, i2], [a1, a2])
    assert not p.has_changes and [o.machine for o in p.outside] == ["node2"]
    # a deleted group of that name is no group: created again
    [p] = plan_placements(inv, [LivePlacement("train-pg", "cluster", "deleted")], [i1], [a1])
    assert p.create
    [p] = plan_placements(inv, [LivePlacement("train-pg", "cluster", "deleting")], [i1], [a1])
    assert "being deleted" in p.error and not p.has_changes
    [p] = plan_placements(inv, [LivePlacement("train-pg", "partition", "available")], [i1], [a1])
    assert "strategy partition, not cluster" in p.error
    # an instance not found is the attachment's error, not a placement report
    [p] = plan_placements(inv, [there], [], [])
    assert p.outside == ()


def test_clusters_sharing_a_placement_group_plan_it_once(tmp_path: Path) -> None:
    inv = placed(tmp_path, eval={"hosts": ["node2"], "placement_group": "train-pg"})
    [p] = plan_placements(inv, [], [], [])
    assert (p.name, p.clusters, p.create) == ("train-pg", ("eval", "train"), True)
