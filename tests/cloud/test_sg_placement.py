"""A cluster's placement group through `sg plan|apply`.

moto (5.2) does not implement placement groups: `create_placement_group` raises
NotImplementedError and `run_instances` drops `Placement.GroupName`. So:

- the shell's two calls are checked with botocore's Stubber, which validates every request
  and answer against EC2's own API model (no network);
- the command runs against moto on 127.0.0.1 for everything moto has (groups, instances),
  with the placement-group calls answered by a small fake of ours (botocore `before-call`
  hooks, the way Stubber itself answers) and the instances' placement set by an
  `after-call` hook on `DescribeInstances`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber

from provision.cloud import placement_aws
from provision.cloud.placement import LivePlacement, PlacementPlan
from provision.errors import OperationError

from .test_sg_attach_moto import instance
from .test_sg_moto import OFFICE, apply, ec2, hook_ec2, plan


def offline_client() -> Any:
    return boto3.client("ec2", region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def test_fetch_and_create_send_what_the_api_model_takes() -> None:
    client = offline_client()
    with Stubber(client) as stub:
        stub.add_response("describe_placement_groups", {"PlacementGroups": [
            {"GroupName": "train-pg", "Strategy": "spread", "State": "available", "GroupId": "pg-0123456789abcdef0"}]},
            {"Filters": [{"Name": "group-name", "Values": ["eval-pg", "train-pg"]}]})
        stub.add_response("create_placement_group", {"PlacementGroup": {
            "GroupName": "train-pg", "Strategy": "cluster", "State": "available", "GroupId": "pg-0aaaaaaaaaaaaaaa1"}},
            {"GroupName": "train-pg", "Strategy": "cluster", "TagSpecifications": [
                {"ResourceType": "placement-group", "Tags": [{"Key": "managed-by", "Value": "provision"}]}]})
        assert placement_aws.fetch(client, ["train-pg", "eval-pg", "train-pg"]) == [
            LivePlacement("train-pg", "spread", "available", "pg-0123456789abcdef0")]
        line = placement_aws.create(client, PlacementPlan("train-pg", ("train",), True))
        assert line == "placement group train-pg: created (pg-0aaaaaaaaaaaaaaa1), strategy cluster"
        stub.assert_no_pending_responses()
    assert placement_aws.fetch(client, []) == []  # none named: no call (the stub is gone)


def test_a_refusal_is_one_line() -> None:
    client = offline_client()
    with Stubber(client) as stub:
        stub.add_client_error("create_placement_group", "InvalidPlacementGroup.Duplicate",
                              "The placement group 'train-pg' already exists.")
        with pytest.raises(OperationError, match=re.escape("creating placement group train-pg: "
                                                           "InvalidPlacementGroup.Duplicate")):
            placement_aws.create(client, PlacementPlan("train-pg", ("train",), True))


# --- the command: moto for groups and instances, our fake for placement groups -------------

class FakePlacements:
    """What AWS would hold: placement groups by name, and the group of each instance."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[str, Any]] = {}
        self.of_instance: dict[str, str] = {}
        self.calls: list[str] = []
        self.params: dict[str, Any] = {}

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # the API parameters (before-call sees them serialized), then the answer
        hook_ec2(monkeypatch, "before-parameter-build.ec2.DescribePlacementGroups", self.asked)
        hook_ec2(monkeypatch, "before-parameter-build.ec2.CreatePlacementGroup", self.asked)
        hook_ec2(monkeypatch, "before-call.ec2.DescribePlacementGroups", self.describe)
        hook_ec2(monkeypatch, "before-call.ec2.CreatePlacementGroup", self.create)
        hook_ec2(monkeypatch, "after-call.ec2.DescribeInstances", self.placed)
        for op in ("StopInstances", "ModifyInstancePlacement", "TerminateInstances"):
            hook_ec2(monkeypatch, f"before-call.ec2.{op}", self.refuse)

    @staticmethod
    def answer(body: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        return AWSResponse("https://fake", 200, {}, None), body

    def asked(self, params: dict[str, Any], **_: Any) -> None:
        self.params = dict(params)

    def describe(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        self.calls.append("describe")
        names = {v for f in self.params.get("Filters", []) if f["Name"] == "group-name" for v in f["Values"]}
        return self.answer({"PlacementGroups": [g for n, g in self.groups.items() if n in names]})

    def create(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        params = self.params
        self.calls.append(f"create {params['GroupName']} {params['Strategy']}")
        g = {"GroupName": params["GroupName"], "Strategy": params["Strategy"], "State": "available",
             "GroupId": f"pg-{len(self.groups):017x}"}
        self.groups[params["GroupName"]] = g
        return self.answer({"PlacementGroup": g})

    def placed(self, parsed: dict[str, Any], **_: Any) -> None:
        for res in parsed.get("Reservations", []):
            for i in res.get("Instances", []):
                i.setdefault("Placement", {})["GroupName"] = self.of_instance.get(i["InstanceId"], "")

    def refuse(self, model: Any, **_: Any) -> None:
        raise AssertionError(f"{model.name} called: provision never stops or moves an instance")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakePlacements:
    f = FakePlacements()
    f.install(monkeypatch)
    return f


def cluster_inventory(tmp_path: Path, vpc: str, ids: dict[str, str]) -> Path:
    doc: dict[str, Any] = {
        "version": 1,
        "hosts": {n: {"address": a, "ssh_from": [OFFICE], "security_groups": ["train"],
                      "aws": {"instance_id": ids[n]}}
                  for n, a in (("node1", "10.0.1.21"), ("node2", "10.0.1.22"))},
        "aws": {"region": "us-east-1", "security_groups": {
            "train": {"vpc": vpc, "ingress": [{"port": 22, "from": [OFFICE]}]}}},
        "clusters": {"train": {"hosts": ["node1", "node2"], "security_group": "train",
                               "placement_group": "train-pg"}},
    }
    path = tmp_path / "inv.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture
def net(aws_env: str) -> tuple[str, str]:
    client = ec2()
    vpc = str(client.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"])
    subnet = str(client.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"])
    return vpc, subnet


def test_a_missing_placement_group_is_created_and_outsiders_reported(
        net: tuple[str, str], tmp_path: Path, fake: FakePlacements) -> None:
    vpc, subnet = net
    ids = {"node1": instance(subnet, "10.0.1.21"), "node2": instance(subnet, "10.0.1.22")}
    inv = cluster_inventory(tmp_path, vpc, ids)
    shown = plan(inv)
    assert shown.exit_code == 3, shown.output
    assert "placement group train-pg (cluster train)" in shown.output
    assert "+ create placement group train-pg (cluster)" in shown.output
    for n in ("node1", "node2"):
        assert (f"{n} ({ids[n]}) is in no placement group: moving a running instance needs a "
                "stop: not done") in shown.output
    assert fake.calls == ["describe"]

    done = apply(inv, "--no-confirm")
    assert done.exit_code == 0, done.output
    assert "placement group train-pg: created (pg-00000000000000000), strategy cluster" in done.output
    assert fake.calls.count("create train-pg cluster") == 1
    assert fake.groups["train-pg"]["Strategy"] == "cluster"

    # node1 was launched into it since (a stop and a start, by the operator): only node2 left
    fake.of_instance[ids["node1"]] = "train-pg"
    again = plan(inv)
    assert again.exit_code == 0, again.output  # a report, not a change
    assert "No changes." in again.output
    assert "create placement group" not in again.output
    assert f"node1 ({ids['node1']})" not in again.output
    assert f"node2 ({ids['node2']}) is in no placement group" in again.output
    assert fake.calls.count("create train-pg cluster") == 1  # the plan created nothing


def test_a_placement_group_of_another_strategy_stops_the_plan(
        net: tuple[str, str], tmp_path: Path, fake: FakePlacements) -> None:
    vpc, subnet = net
    ids = {"node1": instance(subnet, "10.0.1.21"), "node2": instance(subnet, "10.0.1.22")}
    fake.groups["train-pg"] = {"GroupName": "train-pg", "Strategy": "spread", "State": "available"}
    fake.of_instance[ids["node2"]] = "other-pg"
    inv = cluster_inventory(tmp_path, vpc, ids)
    shown = plan(inv)
    assert shown.exit_code == 1, shown.output
    assert "placement group train-pg exists with strategy spread, not cluster" in shown.output
    done = apply(inv, "--no-confirm")
    assert done.exit_code == 1, done.output
    assert not [c for c in fake.calls if c.startswith("create")]
    # and nothing else was applied: the security group was not created either
    assert "train" not in {g["GroupName"] for g in ec2().describe_security_groups()["SecurityGroups"]}
