"""`provision import sg` writes what exists so that `sg plan` right after shows no changes:
groups made with boto3 directly in moto on 127.0.0.1, never AWS."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner, Result

from provision.cli import main

from .test_sg_moto import ec2, plan


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["import", "sg", *args])


def test_import_round_trip_plans_no_changes(aws_env: str, tmp_path: Path) -> None:
    c = ec2()
    vpc = c.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    web = c.create_security_group(GroupName="web", Description="web tier", VpcId=vpc)["GroupId"]
    app = c.create_security_group(GroupName="app servers", Description="app tier", VpcId=vpc)["GroupId"]
    c.authorize_security_group_ingress(GroupId=web, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "IpRanges": [{"CidrIp": "0.0.0.0/0", "Description": "https"}],
         "Ipv6Ranges": [{"CidrIpv6": "::/0", "Description": "https"}]},
        {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": web}]},
    ])
    c.authorize_security_group_ingress(GroupId=app, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 8000, "ToPort": 8100, "UserIdGroupPairs": [{"GroupId": web, "Description": "api"}]},
        {"IpProtocol": "udp", "FromPort": 53, "ToPort": 53, "IpRanges": [{"CidrIp": "10.0.0.0/8"}]},
        {"IpProtocol": "icmp", "FromPort": -1, "ToPort": -1, "IpRanges": [{"CidrIp": "10.0.0.0/8"}]},
        {"IpProtocol": "58", "FromPort": -1, "ToPort": -1, "Ipv6Ranges": [{"CidrIpv6": "2001:DB8::/32"}]},
        {"IpProtocol": "icmp", "FromPort": 8, "ToPort": 0, "IpRanges": [{"CidrIp": "192.0.2.0/24"}]},
    ])
    c.revoke_security_group_egress(GroupId=app, IpPermissions=[
        {"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}])
    c.authorize_security_group_egress(GroupId=app, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 5432, "ToPort": 5432, "UserIdGroupPairs": [{"GroupId": web}]}])

    out = tmp_path / "adopted.yml"
    # one group named: the group it references comes along
    result = run("--region", "us-east-1", "--group", "app servers", "-o", str(out))
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(out.read_text())
    groups = doc["aws"]["security_groups"]
    assert set(groups) == {"app-servers", "web"}
    app_doc = groups["app-servers"]
    assert app_doc["id"] == app and app_doc["vpc"] == vpc
    assert {"ports": [8000, 8100], "from": ["web"], "description": "api"} in app_doc["ingress"]
    assert {"protocol": "icmp", "from": ["10.0.0.0/8", "2001:db8::/32"]} in app_doc["ingress"] or (
        {"protocol": "icmp", "from": ["10.0.0.0/8"]} in app_doc["ingress"]
        and {"protocol": "icmp", "from": ["2001:db8::/32"]} in app_doc["ingress"])
    assert app_doc["egress"] == [{"port": 5432, "to": ["web"]}]
    assert "egress" not in groups["web"]  # the AWS default: left alone
    assert {"protocol": "all", "from": ["web"]} in groups["web"]["ingress"]
    # the type-specific ICMP rule cannot be written: said so, and left as drift
    assert "skipped ingress icmp type 8 code 0 from 192.0.2.0/24" in " ".join(result.output.split())

    again = plan(out)
    assert again.exit_code == 0, again.output
    assert "No changes." in again.output
    assert "drift: ingress icmp type 8 code 0 from 192.0.2.0/24" in again.output

    # the whole VPC, to stdout, with the region from an inventory
    inv = tmp_path / "inv.yml"
    inv.write_text("version: 1\naws: {region: us-east-1}\n")
    whole = run("-i", str(inv), "--vpc", vpc)
    assert whole.exit_code == 0, whole.output
    assert set(yaml.safe_load(whole.stdout)["aws"]["security_groups"]) == {"app-servers", "web", "default"}


def test_import_bad_input(aws_env: str) -> None:
    result = run("--region", "us-east-1", "--group", "nope")
    assert result.exit_code == 1 and "no security group nope" in result.output, result.output
    result = run("--region", "Moon-1")
    assert result.exit_code == 2 and "not an AWS region name" in result.output, result.output


def test_import_kinds_are_listed() -> None:
    result = CliRunner().invoke(main, ["import", "--help"])
    assert result.exit_code == 0 and "sg" in result.output


def test_import_reads_back_what_aws_holds(aws_env: str, vpc: str, tmp_path: Path) -> None:
    """Issue 34, class 5: a group named like an address, referenced by another group's
    rule, was written as that name, which the inventory reads as the CIDR: `sg plan` then
    proposed admitting 203.0.113.7/32. A description ending in a newline was written as
    it was, and the file did not load."""
    c = ec2()
    web = c.create_security_group(GroupName="web", Description="web", VpcId=vpc)["GroupId"]
    ip = c.create_security_group(GroupName="203.0.113.7", Description="x", VpcId=vpc)["GroupId"]
    c.authorize_security_group_ingress(GroupId=web, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "UserIdGroupPairs": [{"GroupId": ip}]},
        {"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80,
         "IpRanges": [{"CidrIp": "10.0.0.0/8", "Description": "http\n"}]},
    ])
    out = tmp_path / "adopted.yml"
    result = run("--region", "us-east-1", "--group", "web", "-o", str(out))
    assert result.exit_code == 0, result.output
    groups = yaml.safe_load(out.read_text())["aws"]["security_groups"]
    assert groups["group-203.0.113.7"]["id"] == ip
    assert {"port": 22, "from": ["group-203.0.113.7"]} in groups["web"]["ingress"]
    assert "skipped ingress tcp 80 from 10.0.0.0/8  # http\\n" in result.output
    again = plan(out)
    assert again.exit_code == 0, again.output
    assert "No changes." in again.output and "203.0.113.7/32" not in again.output
    assert "drift: ingress tcp 80 from 10.0.0.0/8" in again.output


def test_import_refuses_what_cannot_be_written_and_keeps_the_file(aws_env: str, tmp_path: Path) -> None:
    """What would read back otherwise than AWS holds it refuses the import (exit 1), names
    the group and the rule, and leaves the previous file as it was."""
    c = ec2()
    out = tmp_path / "adopted.yml"
    out.write_text("# the previous file\n")

    def fresh_vpc() -> str:
        return str(c.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"])

    # a managed group's egress to a prefix list: the adopted inventory would revoke it
    v1 = fresh_vpc()
    app = c.create_security_group(GroupName="app", Description="app", VpcId=v1, TagSpecifications=[
        {"ResourceType": "security-group", "Tags": [{"Key": "managed-by", "Value": "provision"}]}])["GroupId"]
    c.authorize_security_group_egress(GroupId=app, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "PrefixListIds": [{"PrefixListId": "pl-0123abcd"}]}])
    # two rules that are one to the inventory (10.0.0.1/8 is 10.0.0.0/8)
    v2 = fresh_vpc()
    db = c.create_security_group(GroupName="db", Description="db", VpcId=v2)["GroupId"]
    c.authorize_security_group_ingress(GroupId=db, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 5432, "ToPort": 5432, "IpRanges": [{"CidrIp": "10.0.0.1/8", "Description": "a"}]}])
    c.authorize_security_group_ingress(GroupId=db, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 5432, "ToPort": 5432, "IpRanges": [{"CidrIp": "10.0.0.0/8", "Description": "b"}]}])
    # a group description the inventory cannot hold
    v3 = fresh_vpc()
    uni = c.create_security_group(GroupName="uni", Description="caf\u00e9", VpcId=v3)["GroupId"]

    for v, expect in ((v1, f"group app ({app}): egress tcp 443 to pl-0123abcd (sgr-"),
                      (v2, f"group db ({db}): ingress tcp 5432 from 10.0.0.0/8  # "),
                      (v3, f"group uni ({uni}): its description 'caf\u00e9' has characters")):
        result = run("--region", "us-east-1", "--vpc", v, "-o", str(out))
        assert result.exit_code == 1, result.output
        assert "nothing written" in result.output and expect in result.output, result.output
        assert "read as one rule" in result.output or v != v2
        assert out.read_text() == "# the previous file\n"
        assert [p.name for p in tmp_path.iterdir()] == ["adopted.yml"]
