"""`provision audit` reads the attached security groups from AWS (describe calls only) and
joins them into the per-port reach: against moto on 127.0.0.1, never AWS."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.commands.audit import _security_groups
from provision.exposure import join as JN
from provision.exposure import live as LV
from provision.facts import parse
from provision.inventory import load_inventory

from .test_sg_moto import apply, ec2, groups_by_name, hook_ec2, inventory


def test_live_groups_are_read_and_joined(vpc: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = inventory(tmp_path, vpc)
    assert apply(path).exit_code == 0
    # someone opens Jupyter's port in the console, past the inventory
    gid = groups_by_name()["gpu-servers"]["GroupId"]
    ec2().authorize_security_group_ingress(GroupId=gid, IpPermissions=[{
        "IpProtocol": "tcp", "FromPort": 8888, "ToPort": 8888, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}])
    calls: list[str] = []
    hook_ec2(monkeypatch, "before-call.ec2.*", lambda model, **_: calls.append(model.name))
    inv = load_inventory(str(path))
    sg = _security_groups(inv, (*inv.bastions, *inv.hosts), True, None)
    assert sg.source == "aws"
    assert all(c.startswith("Describe") for c in calls) and calls, calls
    gpu1 = sg["gpu1"]
    assert JN.SgRule("gpu-servers", "tcp", 8888, 8888, "0.0.0.0/0") in gpu1
    # declared only: the console rule is not there
    declared = _security_groups(inv, (*inv.bastions, *inv.hosts), False, None)
    assert declared.source == "inventory"
    assert not any(r.from_port == 8888 for r in declared["gpu1"] or ())
    # a token-less Jupyter bound to 0.0.0.0 behind no host firewall: the live group makes it
    # reachable from the internet, the declared groups would not
    probe = "\n".join([
        "probe\t1",
        'ltcp\tLISTEN 0 128 0.0.0.0:8888 0.0.0.0:* users:(("jupyter-lab",pid=7,fd=3))',
        "iptrc\t4\t0", "iptrc\t6\t0", "end", ""])
    facts = parse(probe)
    host = inv.node("gpu1")
    live = LV.report(inv, host, facts, gpu1)
    port = next(p for p in live.ports if p.port == 8888)
    assert port.level == "internet" and "0.0.0.0/0" in port.sg
    assert "code-exec-internet" in {f.code for f in live.findings}
    dec = LV.report(inv, host, facts, declared["gpu1"])
    assert next(p for p in dec.ports if p.port == 8888).level == "host"

