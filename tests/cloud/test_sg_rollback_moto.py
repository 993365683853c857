"""`sg apply` deletes the groups it just created when it stops before their rules: a
creation AWS refuses midway, or a re-plan (group ids now known) that is refused. Against
moto on 127.0.0.1; the refusal and the race are injected through botocore's event hooks,
the way another operator or an account limit would cause them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .test_sg_moto import apply, base_groups, ec2, groups_by_name, hook_ec2, inventory, rules_of


def test_a_creation_refused_midway_deletes_the_groups_created_before_it(
        vpc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import ClientError

    calls: list[str] = []

    def limit(params: dict[str, Any], **_: Any) -> None:
        calls.append(params["GroupName"])
        if len(calls) == 2:
            raise ClientError({"Error": {"Code": "SecurityGroupLimitExceeded",
                                         "Message": "The maximum number of security groups has been reached"}},
                              "CreateSecurityGroup")

    hook_ec2(monkeypatch, "provide-client-params.ec2.CreateSecurityGroup", limit)
    result = apply(inventory(tmp_path, vpc))
    assert result.exit_code == 1, result.output
    first = calls[0]
    out = " ".join(result.output.split())
    assert f"rolled back: {first}: deleted sg-" in out and "again" in out, out
    assert "limit" in out.lower()
    left = {n for n, g in groups_by_name().items() if g["VpcId"] == vpc and n != "default"}
    assert left == set(), left  # the first group is gone, the second was never made


def test_a_refused_replan_deletes_the_new_group_and_sends_no_rule(
        vpc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the new group is created, someone adds 12 rules to a managed group: the re-plan
    would revoke 12 of the 22 managed rules (over 30 %) and is refused without --force. The
    new group is deleted again, and the 12 rules stay: no revoke was sent."""
    groups = base_groups(vpc)
    assert apply(inventory(tmp_path, vpc, groups)).exit_code == 0
    gpu = groups_by_name()["gpu-servers"]["GroupId"]
    before = len(rules_of(gpu))

    def meanwhile(**_: Any) -> None:
        ec2().authorize_security_group_ingress(GroupId=gpu, IpPermissions=[{
            "IpProtocol": "tcp", "FromPort": 8000, "ToPort": 8000,
            "IpRanges": [{"CidrIp": f"192.0.2.{i}/32"} for i in range(12)]}])

    hook_ec2(monkeypatch, "after-call.ec2.CreateSecurityGroup", meanwhile)
    groups["monitoring"] = {"vpc": vpc, "ingress": [{"port": 9100, "from": ["10.0.0.0/16"]}]}
    result = apply(inventory(tmp_path, vpc, groups))
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert "refusing" in out and "rolled back: monitoring: deleted sg-" in out, out
    assert "monitoring" not in groups_by_name()
    assert len(rules_of(gpu)) == before + 12
