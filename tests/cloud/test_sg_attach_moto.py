"""`sg apply` attaches groups to instances, deletes dropped managed groups, and checks
VPCs and instances at plan: against moto on 127.0.0.1, never AWS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from .test_sg_moto import apply, base_groups, ec2, groups_by_name, hook_ec2, inventory, plan, sg


@pytest.fixture
def net(aws_env: str) -> tuple[str, str]:
    client = ec2()
    vpc = str(client.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"])
    subnet = str(client.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"])
    return vpc, subnet


def instance(subnet: str, address: str) -> str:
    r = ec2().run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, SubnetId=subnet,
                            PrivateIpAddress=address)
    return str(r["Instances"][0]["InstanceId"])


def groups_of(instance_id: str) -> set[str]:
    res = ec2().describe_instances(InstanceIds=[instance_id])["Reservations"]
    eni = next(n for n in res[0]["Instances"][0]["NetworkInterfaces"] if n["Attachment"]["DeviceIndex"] == 0)
    return {g["GroupName"] for g in eni["Groups"]}


def attached_inventory(tmp_path: Path, vpc: str, jump_id: str, groups: dict[str, Any] | None = None,
                       gpu_groups: tuple[str, ...] = ("gpu-servers",)) -> Path:
    """The base inventory with the bastion named by instance id and gpu1 found by address."""
    path = inventory(tmp_path, vpc, groups)
    import yaml

    doc = yaml.safe_load(path.read_text())
    doc["bastions"]["jump"]["aws"] = {"instance_id": jump_id, "keep_groups": []}
    doc["hosts"]["gpu1"]["aws"] = {}
    doc["hosts"]["gpu1"]["security_groups"] = list(gpu_groups)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_attach_by_id_and_by_address_then_no_op_then_detach(net: tuple[str, str], tmp_path: Path) -> None:
    vpc, subnet = net
    jump, gpu = instance(subnet, "10.0.1.10"), instance(subnet, "10.0.1.21")
    groups = base_groups(vpc)
    groups["monitoring"] = {"vpc": vpc, "ingress": [{"port": 9100, "from": ["10.0.0.0/16"]}]}
    inv = attached_inventory(tmp_path, vpc, jump, groups, ("gpu-servers", "monitoring"))
    shown = plan(inv)
    assert shown.exit_code == 3, shown.output
    assert f"instance of jump ({jump}" in shown.output
    assert "+ attach group bastion-sg (to be created)" in shown.output
    assert f"instance of gpu1 ({gpu}" in shown.output
    assert "- detach group default" in shown.output

    # the instances are not reachable from a test: no SSH confirmation (the lab test has it)
    done = apply(inv, "--no-confirm")
    assert done.exit_code == 0, done.output
    assert "SSH not confirmed (--no-confirm) for jump, gpu1" in done.output
    assert groups_of(jump) == {"bastion-sg"}
    assert groups_of(gpu) == {"gpu-servers", "monitoring"}
    again = plan(inv)
    assert again.exit_code == 0 and "No changes." in again.output, again.output

    # monitoring dropped from gpu1 (still declared): detached, not deleted
    inv = attached_inventory(tmp_path, vpc, jump, groups, ("gpu-servers",))
    shown = plan(inv)
    assert "- detach group monitoring (sg-" in shown.output, shown.output
    assert "Plan: 0 to add, 0 to change, 1 to destroy." in shown.output
    assert apply(inv, "--no-confirm").exit_code == 0
    assert groups_of(gpu) == {"gpu-servers"}
    assert "monitoring" in groups_by_name()


def test_keep_groups_stay_attached(net: tuple[str, str], tmp_path: Path) -> None:
    vpc, subnet = net
    jump, _ = instance(subnet, "10.0.1.10"), instance(subnet, "10.0.1.21")
    eks = ec2().create_security_group(GroupName="eks-nodes", Description="made elsewhere", VpcId=vpc)["GroupId"]
    inv = attached_inventory(tmp_path, vpc, jump)
    import yaml

    doc = yaml.safe_load(inv.read_text())
    doc["bastions"]["jump"]["aws"]["keep_groups"] = [eks]
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert apply(inv, "--no-confirm").exit_code == 0
    assert groups_of(jump) == {"bastion-sg", "eks-nodes"}
    assert plan(inv).exit_code == 0


def test_dropped_managed_group_is_deleted_with_force_foreign_never(net: tuple[str, str], tmp_path: Path) -> None:
    vpc, _ = net
    foreign = ec2().create_security_group(GroupName="legacy", Description="hand made", VpcId=vpc)["GroupId"]
    groups = base_groups(vpc)
    groups["old-api"] = {"vpc": vpc, "ingress": [{"port": 8080, "from": ["10.0.0.0/8"]}]}
    assert apply(inventory(tmp_path, vpc, groups)).exit_code == 0
    old = groups_by_name()["old-api"]["GroupId"]
    del groups["old-api"]
    inv = inventory(tmp_path, vpc, groups)
    shown = plan(inv)
    assert shown.exit_code == 3, shown.output
    assert f"security group old-api ({old})" in shown.output
    assert f"- group old-api in {vpc} with its 2 rule(s)" in shown.output
    assert "the plan deletes 1 security group(s) (old-api)" in shown.output
    assert "legacy" not in shown.output
    refused = apply(inv)
    assert refused.exit_code == 1 and "pass --force" in refused.output, refused.output
    assert "old-api" in groups_by_name()
    done = apply(inv, "--force")
    assert done.exit_code == 0, done.output
    names = groups_by_name()
    assert "old-api" not in names and names["legacy"]["GroupId"] == foreign
    assert plan(inv).exit_code == 0


def test_group_still_attached_is_refused_naming_the_instance(net: tuple[str, str], tmp_path: Path) -> None:
    vpc, subnet = net
    gpu = instance(subnet, "10.0.1.21")
    groups = base_groups(vpc)
    groups["old-api"] = {"vpc": vpc, "ingress": [{"port": 8080, "from": ["gpu-servers"]}]}
    assert apply(inventory(tmp_path, vpc, groups)).exit_code == 0
    ids = {n: g["GroupId"] for n, g in groups_by_name().items()}
    eni = ec2().describe_instances(InstanceIds=[gpu])["Reservations"][0]["Instances"][0]["NetworkInterfaces"][0]
    # attached by hand, outside the inventory; and a foreign group references it
    ec2().modify_network_interface_attribute(NetworkInterfaceId=eni["NetworkInterfaceId"], Groups=[ids["old-api"]])
    legacy = ec2().create_security_group(GroupName="legacy", Description="hand made", VpcId=vpc)["GroupId"]
    ec2().authorize_security_group_ingress(GroupId=legacy, IpPermissions=[{
        "IpProtocol": "tcp", "FromPort": 5432, "ToPort": 5432, "UserIdGroupPairs": [{"GroupId": ids["old-api"]}]}])
    del groups["old-api"]
    groups["gpu-servers"]["ingress"].append({"port": 9000, "from": [str(OTHER)]})
    inv = inventory(tmp_path, vpc, groups)
    refused = apply(inv, "--force")
    assert refused.exit_code == 1, refused.output
    out = " ".join(refused.output.split())
    assert f"cannot delete old-api ({ids['old-api']})" in out
    assert f"network interface {eni['NetworkInterfaceId']} of instance {gpu}" in out
    assert f"1 rule(s) of group legacy ({legacy})" in out
    # nothing else was applied either
    rules = ec2().describe_security_group_rules(
        Filters=[{"Name": "group-id", "Values": [ids["gpu-servers"]]}])["SecurityGroupRules"]
    assert 9000 not in [r.get("FromPort") for r in rules]
    assert "old-api" in groups_by_name()


OTHER = "192.0.2.0/24"


def test_bad_instance_and_vpc_fail_at_plan_nothing_applied(net: tuple[str, str], tmp_path: Path) -> None:
    vpc, _ = net
    inv = attached_inventory(tmp_path, vpc, "i-0123456789abcdef0")
    result = apply(inv)
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert "instance of jump" in out and "instance i-0123456789abcdef0 does not exist" in out
    assert "instance of gpu1" in out and f"no instance with private address 10.0.1.21 in {vpc}" in out
    assert "bastion-sg" not in groups_by_name()

    west = boto3.client("ec2", region_name="us-west-2").create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    groups = base_groups(vpc)
    groups["gpu-servers"]["vpc"] = west
    result = plan(inventory(tmp_path, vpc, groups))
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert f"VPC {west} does not exist in this account and region (us-east-1" in out
    assert "+ group gpu-servers" not in out


def test_two_machines_that_find_one_instance_fail_at_plan_nothing_applied(
        net: tuple[str, str], tmp_path: Path) -> None:
    """The bastion names the instance by id, the host finds the same one by its private
    address (the load-time check sees two different claims): before, the bastion got its
    attachment planned, and the host "2 instances have private address 10.0.1.21 (ID, ID)",
    the one instance counted twice (issue 34, class 4)."""
    vpc, subnet = net
    gpu = instance(subnet, "10.0.1.21")
    before = groups_of(gpu)
    inv = attached_inventory(tmp_path, vpc, gpu)  # jump: instance_id gpu; gpu1: by address
    result = apply(inv, "--no-confirm")
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert f"instance {gpu} is also the instance of gpu1: one EC2 instance is one machine" in out
    assert f"instance {gpu} is also the instance of jump: one EC2 instance is one machine" in out
    assert groups_of(gpu) == before
    assert "bastion-sg" not in groups_by_name()


def test_bad_machine_aws_block_exits_2(aws_env: str, tmp_path: Path) -> None:
    path = tmp_path / "inv.yml"
    path.write_text("version: 1\nhosts:\n  gpu1:\n    address: gpu1.example.org\n"
                    "    security_groups: [web]\n    aws: {}\n"
                    "aws:\n  region: us-east-1\n  security_groups:\n    web: {vpc: vpc-0abc1234}\n")
    result = sg("plan", "-i", str(path))
    assert result.exit_code == 2, result.output
    assert f"{path}:6:" in result.output and "give aws.instance_id or aws.private_address" in result.output
    path.write_text(path.read_text().replace("aws: {}", "aws: {instance_id: i-xyz}"))
    result = sg("plan", "-i", str(path))
    assert result.exit_code == 2 and "is not an EC2 instance id" in result.output, result.output
    path.write_text(path.read_text().replace("i-xyz", "i-0123abcd").replace(
        "web: {vpc: vpc-0abc1234}", "web: {vpc: vpc-0abc1234, ingress: [{port: 22, from: [nope]}]}"))
    result = sg("plan", "-i", str(path))
    assert result.exit_code == 2 and "no security group named 'nope'" in result.output, result.output


def test_a_dependency_violation_at_apply_names_the_holder(net: tuple[str, str], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Someone attaches the group between plan and delete: AWS refuses (injected here, since
    moto does not enforce it, after really attaching it), and the message names the holder."""
    from botocore.exceptions import ClientError

    vpc, subnet = net
    gpu = instance(subnet, "10.0.1.21")
    groups = base_groups(vpc)
    groups["old-api"] = {"vpc": vpc, "ingress": [{"port": 8080, "from": ["10.0.0.0/8"]}]}
    assert apply(inventory(tmp_path, vpc, groups)).exit_code == 0
    old = groups_by_name()["old-api"]["GroupId"]
    eni = ec2().describe_instances(InstanceIds=[gpu])["Reservations"][0]["Instances"][0][
        "NetworkInterfaces"][0]["NetworkInterfaceId"]
    del groups["old-api"]

    def race(params: dict[str, Any], **_: Any) -> None:
        ec2().modify_network_interface_attribute(NetworkInterfaceId=eni, Groups=[old])
        raise ClientError({"Error": {"Code": "DependencyViolation",
                                     "Message": f"resource {old} has a dependent object"}}, "DeleteSecurityGroup")

    hook_ec2(monkeypatch, "before-call.ec2.DeleteSecurityGroup", race)
    result = apply(inventory(tmp_path, vpc, groups), "--force")
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert f"AWS: cannot delete old-api ({old}): still used by network interface {eni} of instance {gpu}" in out
    assert "Traceback" not in out


def test_a_group_untagged_after_the_plan_is_not_deleted(net: tuple[str, str], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Someone takes the group over (removes managed-by: provision) while the apply runs,
    here during the step just before the deletions: it is read again and left alone."""
    from provision.cloud import apply as sg_cmd  # the engine of sg apply

    vpc, _ = net
    groups = base_groups(vpc)
    groups["old-api"] = {"vpc": vpc, "ingress": [{"port": 8080, "from": ["10.0.0.0/8"]}]}
    assert apply(inventory(tmp_path, vpc, groups)).exit_code == 0
    old = groups_by_name()["old-api"]["GroupId"]
    del groups["old-api"]
    real_confirm = sg_cmd._confirm_ssh

    def meanwhile(*a: Any, **kw: Any) -> None:
        ec2().delete_tags(Resources=[old], Tags=[{"Key": "managed-by"}])
        real_confirm(*a, **kw)

    monkeypatch.setattr(sg_cmd, "_confirm_ssh", meanwhile)
    result = apply(inventory(tmp_path, vpc, groups), "--force")
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert f"old-api ({old}) is no longer tagged managed-by: provision in {vpc} since the plan: " \
           "not deleted" in out, out
    assert groups_by_name()["old-api"]["GroupId"] == old


@pytest.mark.parametrize("refuse", [False, True])
def test_ssh_not_confirmed_reverts_rules_and_attachment_even_if_one_revert_fails(
        net: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refuse: bool) -> None:
    """No new SSH connection (faked here: the instances are moto's; the lab test has real
    SSH): the SSH rule change and the attachment are both put back, and a revert AWS
    refuses does not stop the other one."""
    from botocore.exceptions import ClientError

    from provision.hosts import confirm as confirm_mod

    vpc, subnet = net
    jump, gpu = instance(subnet, "10.0.1.10"), instance(subnet, "10.0.1.21")
    groups = base_groups(vpc)
    groups["monitoring"] = {"vpc": vpc, "ingress": [{"port": 9100, "from": ["10.0.0.0/16"]}]}
    assert apply(attached_inventory(tmp_path, vpc, jump, groups), "--no-confirm").exit_code == 0
    def ingress() -> set[tuple[Any, ...]]:
        gid = groups_by_name()["gpu-servers"]["GroupId"]
        return {(r["FromPort"], r.get("CidrIpv4"), r.get("CidrIpv6"),
                 r.get("ReferencedGroupInfo", {}).get("GroupId"))
                for r in ec2().describe_security_group_rules(Filters=[{"Name": "group-id", "Values": [
                    gid]}])["SecurityGroupRules"] if not r["IsEgress"]}

    rules_before = ingress()
    groups["gpu-servers"]["ingress"][0] = {"port": 22, "from": ["10.9.9.0/24"]}  # SSH rule changes
    inv = attached_inventory(tmp_path, vpc, jump, groups, ("gpu-servers", "monitoring"))
    monkeypatch.setattr(confirm_mod, "confirm", lambda *a, **k: confirm_mod.Confirmation(
        [None], "no answer", 0.1))
    calls = {"authorize": 0}

    def refuse_the_rule_revert(params: dict[str, Any], **_: Any) -> None:
        calls["authorize"] += 1
        if refuse and calls["authorize"] == 2:  # the apply's own authorize, then the revert's
            raise ClientError({"Error": {"Code": "InternalError", "Message": "try later"}},
                              "AuthorizeSecurityGroupIngress")

    hook_ec2(monkeypatch, "before-call.ec2.AuthorizeSecurityGroupIngress", refuse_the_rule_revert)
    result = apply(inv)
    out = " ".join(result.output.split())
    assert result.exit_code == 1, out
    assert "no new SSH connection within" in out, out
    assert groups_of(gpu) == {"gpu-servers"}  # the attachment is back, in both cases
    if refuse:
        assert "revert failed: AWS:" in out and "reverting failed too" in out, out
        assert "fix it by hand" in out and ingress() != rules_before
    else:
        assert "reverted what touched it" in out and ingress() == rules_before, out
