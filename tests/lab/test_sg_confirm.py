"""`sg apply` confirms SSH after a change that touches it, through the lab's real bastion
and sshd, and reverts the change when no new connection gets through.

The lab cannot enforce AWS rules, so this test emulates their effect with the lab host's
own firewall: after every rule or attachment call `sg apply` makes (wrapped here, never in
shipped code), the instance's live groups in moto are read and, when none admits tcp 22
from the bastion's private address, gpu1 drops that traffic with iptables. Moto runs in
the operator's network namespace (127.0.0.1 there), like the CLI and its SSH connections.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from tests.support.moto_server import aws_test_env, moto_server

from .conftest import Lab

pytestmark = pytest.mark.lab

HOST = "gpu1"
WINDOW = 5


def _drop_rule(src: str) -> list[str]:
    return ["INPUT", "-p", "tcp", "--dport", "22", "-s", f"{src}/32", "-j", "DROP"]


class Emulation:
    """The effect of the instance's security groups on SSH from the bastion, as iptables."""

    def __init__(self, lab: Lab, instance: str, bastion: str):
        self.lab, self.instance, self.bastion = lab, instance, bastion
        self.dropping = False

    def admitted(self) -> bool:
        c = boto3.client("ec2", region_name="us-east-1")
        res = c.describe_instances(InstanceIds=[self.instance])["Reservations"][0]["Instances"][0]
        groups = [g["GroupId"] for n in res["NetworkInterfaces"] for g in n["Groups"]]
        rules = c.describe_security_group_rules(
            Filters=[{"Name": "group-id", "Values": groups}])["SecurityGroupRules"]
        src = ipaddress.ip_address(self.bastion)
        return any(not r["IsEgress"] and r.get("CidrIpv4") and src in ipaddress.ip_network(r["CidrIpv4"])
                   and (r["IpProtocol"] == "-1" or (r["IpProtocol"] == "tcp" and r["FromPort"] <= 22 <= r["ToPort"]))
                   for r in rules)

    def sync(self) -> None:
        drop = not self.admitted()
        if drop and not self.dropping:
            self.lab.host(HOST, "iptables", "-w", "-I", *_drop_rule(self.bastion))
        elif not drop and self.dropping:
            self.lab.host(HOST, "iptables", "-w", "-D", *_drop_rule(self.bastion))
        self.dropping = drop

    def clear(self) -> None:
        while self.lab.host(HOST, "iptables", "-w", "-D", *_drop_rule(self.bastion), check=False).returncode == 0:
            pass
        self.dropping = False


@pytest.fixture
def world(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from provision.cloud import aws as shell

    with lab.operator_netns(), moto_server() as url:
        for key, value in aws_test_env(url).items():
            if value is None:
                monkeypatch.delenv(key, raising=False)
            else:
                monkeypatch.setenv(key, value)
        address = lab.addr(HOST)
        bastion = lab.addr("bastion", "prv")
        c = boto3.client("ec2", region_name="us-east-1")
        vpc = c.create_vpc(CidrBlock=str(ipaddress.ip_network(f"{address}/16", strict=False)))["Vpc"]["VpcId"]
        subnet = c.create_subnet(VpcId=vpc, CidrBlock=str(ipaddress.ip_network(f"{address}/24", strict=False)))
        instance = c.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, PrivateIpAddress=address,
                                   SubnetId=subnet["Subnet"]["SubnetId"])["Instances"][0]["InstanceId"]
        emulation = Emulation(lab, instance, bastion)
        real_execute, real_attach = shell.execute, shell.attach

        def execute(ec2: Any, plan: Any) -> list[str]:
            done = real_execute(ec2, plan)
            emulation.sync()
            return done

        def attach(ec2: Any, plan: Any) -> str:
            done = real_attach(ec2, plan)
            emulation.sync()
            return done

        monkeypatch.setattr(shell, "execute", execute)
        monkeypatch.setattr(shell, "attach", attach)
        doc = yaml.safe_load(lab.inventory.read_text())
        doc["defaults"]["confirm_timeout"] = WINDOW
        doc["hosts"][HOST].update({"security_groups": ["gpu-sg"], "aws": {}})
        doc["aws"] = {"region": "us-east-1", "security_groups": {"gpu-sg": {"vpc": vpc, "ingress": [
            {"port": 22, "from": [f"{bastion}/32"], "description": "ssh from the bastion"}]}}}
        try:
            emulation.sync()  # the instance starts in the VPC's default group: no SSH
            assert emulation.dropping
            yield {"doc": doc, "path": tmp_path / "inv.yml", "emulation": emulation, "bastion": bastion}
        finally:
            emulation.clear()


def _apply(w: dict[str, Any]) -> Any:
    w["path"].write_text(yaml.safe_dump(w["doc"], sort_keys=False))
    return CliRunner().invoke(main, ["sg", "apply", "-i", str(w["path"]), "--yes"])


def test_a_change_that_keeps_ssh_is_kept_one_that_cuts_it_is_reverted(lab: Lab, world: dict[str, Any]) -> None:
    kept = _apply(world)
    out = " ".join(kept.output.split())
    assert kept.exit_code == 0, kept.output
    assert f"{HOST}: a new SSH connection gets through after the change" in out
    assert not world["emulation"].dropping

    world["doc"]["aws"]["security_groups"]["gpu-sg"]["ingress"] = [
        {"port": 22, "from": ["192.0.2.0/24"], "description": "ssh from elsewhere"}]
    cut = _apply(world)
    out = " ".join(cut.output.split())
    assert cut.exit_code == 1, cut.output
    assert f"{HOST}: no new SSH connection within {WINDOW} s" in out
    assert "reverting the SSH rules of gpu-sg" in out
    assert f"SSH to {HOST} did not get through within {WINDOW} s after the change: reverted" in out
    # the rule is back (AWS side) and so SSH (the emulated effect): a real login works
    rules = boto3.client("ec2", region_name="us-east-1").describe_security_group_rules()["SecurityGroupRules"]
    assert [r.get("CidrIpv4") for r in rules if not r["IsEgress"] and r.get("FromPort") == 22] == [
        f"{world['bastion']}/32"]
    assert not world["emulation"].dropping
    assert lab.ssh(HOST, "true").returncode == 0
