"""`provision sg plan|apply` against moto running as a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from click.testing import CliRunner, Result

from provision.cli import main

OFFICE = "203.0.113.0/24"
OFFICE6 = "2001:db8:100::/48"


def ec2() -> Any:
    return boto3.client("ec2", region_name="us-east-1")


def hook_ec2(monkeypatch: pytest.MonkeyPatch, event: str, handler: Any) -> None:
    """Register `handler` for a botocore `event` (e.g. "before-call.ec2.CreateSecurityGroup")
    on every client made while the test runs, provision's included: how these tests
    inject an AWS refusal or someone else's change at one exact call."""
    real_client = boto3.session.Session.client

    def client(self: Any, *a: Any, **kw: Any) -> Any:
        c = real_client(self, *a, **kw)
        c.meta.events.register(event, handler)
        return c

    monkeypatch.setattr(boto3.session.Session, "client", client)


def inventory(tmp_path: Path, vpc: str, groups: dict[str, Any] | None = None, **extra: Any) -> Path:
    """An inventory with a bastion in `bastion-sg` and gpu1 in `gpu-servers`."""
    if groups is None:
        groups = base_groups(vpc)
    doc: dict[str, Any] = {
        "version": 1,
        "bastions": {"jump": {"address": "198.51.100.10", "allow_ssh_from": [OFFICE, OFFICE6],
                              "egress": ["10.0.0.5/32"], "security_groups": ["bastion-sg"]}},
        "hosts": {"gpu1": {"address": "10.0.1.21", "via": "jump", "security_groups": ["gpu-servers"]}},
        "aws": {"region": "us-east-1", "security_groups": groups},
        **extra,
    }
    path = tmp_path / "inv.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def base_groups(vpc: str) -> dict[str, Any]:
    return {
        "bastion-sg": {"vpc": vpc, "description": "bastion", "ingress": [
            {"port": 22, "from": [OFFICE, OFFICE6], "description": "office ssh"},
        ]},
        "gpu-servers": {"vpc": vpc, "description": "gpu servers", "ingress": [
            {"port": 22, "from": ["bastion-sg"], "description": "ssh from the bastion"},
            {"port": 443, "from": ["0.0.0.0/0", "::/0"], "description": "https"},
            {"ports": [60000, 61000], "protocol": "udp", "from": [OFFICE], "description": "mosh"},
            {"protocol": "icmp", "from": [OFFICE]},
        ]},
    }


def sg(*args: str) -> Result:
    return CliRunner().invoke(main, ["sg", *args], catch_exceptions=False)


def plan(inv: Path, *extra: str) -> Result:
    return sg("plan", "-i", str(inv), "--detailed-exitcode", *extra)


def apply(inv: Path, *extra: str) -> Result:
    return sg("apply", "-i", str(inv), "--yes", *extra)


def groups_by_name() -> dict[str, dict[str, Any]]:
    return {g["GroupName"]: g for g in ec2().describe_security_groups()["SecurityGroups"]}


def rules_of(group_id: str, egress: bool = False) -> list[dict[str, Any]]:
    rules = ec2().describe_security_group_rules(
        Filters=[{"Name": "group-id", "Values": [group_id]}])["SecurityGroupRules"]
    return [r for r in rules if r["IsEgress"] == egress]


def converged(inv: Path) -> None:
    result = plan(inv)
    assert result.exit_code == 0, result.output
    assert "No changes." in result.output


def test_create_from_nothing_then_nothing_to_do(vpc: str, tmp_path: Path) -> None:
    inv = inventory(tmp_path, vpc)
    first = plan(inv)
    assert first.exit_code == 3, first.output
    assert "+ group bastion-sg in " + vpc in first.output
    assert "group bastion-sg (to be created)" in first.output
    # 2 groups + 2 bastion rules + 1 (group ref) + 2 (https v4/v6) + 1 udp + 1 icmp
    assert "Plan: 9 to add, 0 to change, 0 to destroy." in first.output

    done = apply(inv)
    assert done.exit_code == 0, done.output
    assert "Applied." in done.output
    converged(inv)

    groups = groups_by_name()
    for name in ("bastion-sg", "gpu-servers"):
        tags = {t["Key"]: t["Value"] for t in groups[name].get("Tags", [])}
        assert tags.get("managed-by") == "provision"
        assert groups[name]["VpcId"] == vpc
    gpu = rules_of(groups["gpu-servers"]["GroupId"])
    ref = [r for r in gpu if r.get("ReferencedGroupInfo")]
    assert [r["ReferencedGroupInfo"]["GroupId"] for r in ref] == [groups["bastion-sg"]["GroupId"]]
    assert {r.get("CidrIpv6") for r in gpu if r.get("CidrIpv6")} == {"::/0"}
    udp = [r for r in gpu if r["IpProtocol"] == "udp"]
    assert [(r["FromPort"], r["ToPort"], r["CidrIpv4"]) for r in udp] == [(60000, 61000, OFFICE)]
    assert [r["CidrIpv4"] for r in gpu if r["IpProtocol"] == "icmp"] == [OFFICE]
    bastion = rules_of(groups["bastion-sg"]["GroupId"])
    assert sorted(str(r.get("CidrIpv4") or r.get("CidrIpv6")) for r in bastion) == sorted([OFFICE, OFFICE6])
    # egress not declared: the AWS default stays
    assert [r["CidrIpv4"] for r in rules_of(groups["gpu-servers"]["GroupId"], egress=True)] == ["0.0.0.0/0"]


def test_add_remove_and_description_change(vpc: str, tmp_path: Path) -> None:
    groups = base_groups(vpc)
    assert apply(inventory(tmp_path, vpc, groups)).exit_code == 0
    gid = groups_by_name()["gpu-servers"]["GroupId"]
    https_v4 = next(r for r in rules_of(gid) if r.get("CidrIpv4") == "0.0.0.0/0")

    rules = groups["gpu-servers"]["ingress"]
    rules[1] = {"port": 443, "from": ["0.0.0.0/0", "::/0"], "description": "public https"}  # ~ x2
    del rules[2]  # - the udp range
    rules.append({"port": 8000, "from": ["10.0.0.0/8"], "description": "model api"})  # +
    inv = inventory(tmp_path, vpc, groups)
    result = plan(inv)
    assert result.exit_code == 3, result.output
    assert "Plan: 1 to add, 2 to change, 1 to destroy." in result.output
    assert "- ingress udp 60000-61000 from 203.0.113.0/24  # mosh" in result.output
    assert "+ ingress tcp 8000 from 10.0.0.0/8  # model api" in result.output
    assert "description: 'https' -> 'public https'" in result.output

    assert apply(inv).exit_code == 0
    converged(inv)
    after = rules_of(gid)
    assert not [r for r in after if r["IpProtocol"] == "udp"]
    assert [r["FromPort"] for r in after if r.get("CidrIpv4") == "10.0.0.0/8"] == [8000]
    same = next(r for r in after if r.get("CidrIpv4") == "0.0.0.0/0")
    # a description change modifies the rule in place: same rule id, new description
    assert same["SecurityGroupRuleId"] == https_v4["SecurityGroupRuleId"]
    assert same["Description"] == "public https"


def test_group_reference_description_change_converges(vpc: str, tmp_path: Path) -> None:
    groups = base_groups(vpc)
    assert apply(inventory(tmp_path, vpc, groups)).exit_code == 0
    groups["gpu-servers"]["ingress"][0]["description"] = "ssh via jump"
    inv = inventory(tmp_path, vpc, groups)
    result = plan(inv)
    assert "Plan: 0 to add, 1 to change, 0 to destroy." in result.output, result.output
    assert apply(inv).exit_code == 0
    converged(inv)


def test_foreign_group_is_never_purged(vpc: str, tmp_path: Path) -> None:
    client = ec2()
    legacy = client.create_security_group(GroupName="legacy", Description="made by hand", VpcId=vpc)["GroupId"]
    client.authorize_security_group_ingress(GroupId=legacy, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 3389, "ToPort": 3389, "IpRanges": [{"CidrIp": "192.0.2.0/24"}]}])
    groups = base_groups(vpc)
    groups["legacy"] = {"id": legacy, "ingress": [{"port": 80, "from": ["10.0.0.0/8"]}]}
    inv = inventory(tmp_path, vpc, groups)

    result = plan(inv)
    assert "drift: ingress tcp 3389 from 192.0.2.0/24" in result.output, result.output
    assert "- ingress tcp 3389" not in result.output
    assert "+ ingress tcp 80 from 10.0.0.0/8" in result.output
    assert apply(inv).exit_code == 0
    ports = sorted(r["FromPort"] for r in rules_of(legacy))
    assert ports == [80, 3389]  # ours added, theirs kept
    again = plan(inv)
    assert again.exit_code == 0, again.output  # drift is reported, not a change
    assert "drift: ingress tcp 3389" in again.output


def test_same_name_untagged_group_is_foreign(vpc: str, tmp_path: Path) -> None:
    client = ec2()
    gid = client.create_security_group(GroupName="bastion-sg", Description="hand made", VpcId=vpc)["GroupId"]
    client.authorize_security_group_ingress(GroupId=gid, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 25, "ToPort": 25, "IpRanges": [{"CidrIp": "192.0.2.0/24"}]}])
    inv = inventory(tmp_path, vpc)
    assert apply(inv).exit_code == 0
    assert 25 in [r["FromPort"] for r in rules_of(gid)]
    assert len([g for g in groups_by_name().values() if g["GroupName"] == "bastion-sg"]) == 1


def test_removing_operator_ssh_rule_needs_force(vpc: str, tmp_path: Path) -> None:
    groups = base_groups(vpc)
    assert apply(inventory(tmp_path, vpc, groups)).exit_code == 0
    bastion = groups_by_name()["bastion-sg"]["GroupId"]
    groups["bastion-sg"]["ingress"] = [{"port": 22, "from": [OFFICE6], "description": "office ssh"}]
    inv = inventory(tmp_path, vpc, groups)

    shown = plan(inv)
    assert "removes the operator's SSH path from 203.0.113.0/24" in shown.output, shown.output
    refused = apply(inv)
    assert refused.exit_code == 1, refused.output
    assert "refusing to remove the rule admitting the operator's SSH path" in refused.output
    assert OFFICE in [r.get("CidrIpv4") for r in rules_of(bastion)]  # nothing changed

    forced = apply(inv, "--force")
    assert forced.exit_code == 0, forced.output
    assert OFFICE not in [r.get("CidrIpv4") for r in rules_of(bastion)]
    converged(inv)


def test_replacing_operator_rule_by_a_covering_one_is_not_refused(vpc: str, tmp_path: Path) -> None:
    groups = base_groups(vpc)
    assert apply(inventory(tmp_path, vpc, groups)).exit_code == 0
    groups["bastion-sg"]["ingress"] = [{"port": 22, "from": ["203.0.112.0/23", OFFICE6]}]
    result = apply(inventory(tmp_path, vpc, groups))
    assert result.exit_code == 0, result.output


def test_drift_behind_our_back_is_shown_and_removed(vpc: str, tmp_path: Path) -> None:
    inv = inventory(tmp_path, vpc)
    assert apply(inv).exit_code == 0
    gid = groups_by_name()["gpu-servers"]["GroupId"]
    ec2().authorize_security_group_ingress(GroupId=gid, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 3306, "ToPort": 3306,
         "IpRanges": [{"CidrIp": "0.0.0.0/0", "Description": "debug"}]}])
    result = plan(inv)
    assert result.exit_code == 3
    assert "- ingress tcp 3306 from 0.0.0.0/0  # debug" in result.output
    assert "Plan: 0 to add, 0 to change, 1 to destroy." in result.output
    assert apply(inv).exit_code == 0
    assert 3306 not in [r.get("FromPort") for r in rules_of(gid)]
    converged(inv)


def test_declared_egress_replaces_the_default(vpc: str, tmp_path: Path) -> None:
    groups = base_groups(vpc)
    groups["gpu-servers"]["egress"] = [{"port": 443, "to": ["0.0.0.0/0"], "description": "https out"}]
    inv = inventory(tmp_path, vpc, groups)
    first = plan(inv)
    assert "- egress all traffic to 0.0.0.0/0" in first.output, first.output
    assert apply(inv).exit_code == 0
    converged(inv)
    out = rules_of(groups_by_name()["gpu-servers"]["GroupId"], egress=True)
    assert [(r["IpProtocol"], r["FromPort"], r["CidrIpv4"]) for r in out] == [("tcp", 443, "0.0.0.0/0")]


def test_plan_json(vpc: str, tmp_path: Path) -> None:
    result = sg("plan", "-i", str(inventory(tmp_path, vpc)), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["summary"] == {"add": 9, "change": 0, "destroy": 0}
    assert {s["name"].split(" (")[0] for s in data["sections"]} == {
        "security group bastion-sg", "security group gpu-servers"}


def test_missing_vpc_is_one_line(aws_env: str, tmp_path: Path) -> None:
    result = apply(inventory(tmp_path, "vpc-0000dead"))
    assert result.exit_code == 1
    assert "VPC vpc-0000dead does not exist" in result.output
    assert "Traceback" not in result.output


def test_missing_existing_group_fails_the_plan(vpc: str, tmp_path: Path) -> None:
    groups = base_groups(vpc)
    groups["old"] = {"id": "sg-0123456789abcdef0", "ingress": []}
    result = plan(inventory(tmp_path, vpc, groups))
    assert result.exit_code == 1, result.output
    assert "sg-0123456789abcdef0 does not exist" in result.output


def test_no_credentials_is_one_line(aws_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = plan(inventory(tmp_path, "vpc-0abc1234"))
    assert result.exit_code == 1, result.output
    assert "no AWS credentials found" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_unknown_profile_is_one_line(aws_env: str, tmp_path: Path) -> None:
    result = plan(inventory(tmp_path, "vpc-0abc1234"), "--profile", "nope")
    assert result.exit_code == 1
    assert "profile" in result.output and "nope" in result.output


def test_inventory_endpoint_url_is_used(aws_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_ENDPOINT_URL_EC2")
    vpc_id = ec2_at(aws_env).create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    path = inventory(tmp_path, vpc_id)
    doc = yaml.safe_load(path.read_text())
    doc["aws"]["endpoint_url"] = aws_env
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert apply(path).exit_code == 0
    assert "bastion-sg" in {g["GroupName"] for g in ec2_at(aws_env).describe_security_groups()["SecurityGroups"]}


def ec2_at(url: str) -> Any:
    return boto3.client("ec2", region_name="us-east-1", endpoint_url=url)


def test_bad_inventory_exits_2(aws_env: str, tmp_path: Path) -> None:
    path = tmp_path / "inv.yml"
    path.write_text("version: 1\naws:\n  region: us-east-1\n  security_groups:\n"
                    "    web:\n      vpc: vpc-0abc1234\n      ingress: [{protocol: sctp, port: 1, from: [10.0.0.0/8]}]\n")
    result = sg("plan", "-i", str(path))
    assert result.exit_code == 2
    assert f"{path}:7:" in result.output


def test_apply_without_a_terminal_needs_yes(vpc: str, tmp_path: Path) -> None:
    result = sg("apply", "-i", str(inventory(tmp_path, vpc)))
    assert result.exit_code == 2
    assert "pass --yes" in result.output
    assert "bastion-sg" not in groups_by_name()  # nothing was created


def test_apply_with_nothing_to_do_changes_nothing(vpc: str, tmp_path: Path) -> None:
    inv = inventory(tmp_path, vpc)
    assert apply(inv).exit_code == 0
    again = sg("apply", "-i", str(inv))  # no --yes needed: nothing to confirm
    assert again.exit_code == 0, again.output
    assert "No changes." in again.output and "Applied." not in again.output


def test_a_hostile_rule_description_from_aws_reaches_the_terminal_escaped(vpc: str, tmp_path: Path) -> None:
    """A provider's answer is outside text: a rule description written in the account by
    someone else (C1 CSI, bidi, zero-width, tag characters, markup; EC2's XML cannot carry
    C0 controls) is printed escaped and literal, on the real stdout of `provision sg plan`
    with a console that believes it is a terminal."""
    import os
    import subprocess
    import sys

    from provision.text import is_unsafe, printable

    hostile = "\x9b2Kx\u202ey\u200bz\U000e0041[bold red]M[/bold red]"
    client = ec2()
    legacy = client.create_security_group(GroupName="legacy", Description="made by hand", VpcId=vpc)["GroupId"]
    client.authorize_security_group_ingress(GroupId=legacy, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 3389, "ToPort": 3389,
         "IpRanges": [{"CidrIp": "192.0.2.0/24", "Description": hostile}]}])
    groups = base_groups(vpc)
    groups["legacy"] = {"id": legacy, "ingress": [{"port": 80, "from": ["10.0.0.0/8"]}]}
    inv = inventory(tmp_path, vpc, groups)
    env = {**os.environ, "TTY_COMPATIBLE": "1", "FORCE_COLOR": "1", "COLUMNS": "1000"}
    r = subprocess.run([sys.executable, "-m", "provision", "sg", "plan", "-i", str(inv)],
                       capture_output=True, env=env, timeout=120)
    out = (r.stdout + r.stderr).decode()
    import re

    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "drift: ingress tcp 3389" in plain, out
    assert not [c for c in plain if c != "\n" and is_unsafe(c)], repr(out)
    assert printable(hostile) in plain
