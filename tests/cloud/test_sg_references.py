"""A rule whose source is another group counts as the addresses of that group's machines,
in the cross-layer findings (`check`) and in `audit`'s reach; a group id the inventory
does not declare is shown as such. Pure: inventories in a temp dir, no AWS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from provision.exposure import findings
from provision.exposure import join as JN
from provision.exposure import live as LV
from provision.facts import parse
from provision.inventory import load_inventory
from provision.inventory.model import Inventory


def inv(tmp_path: Path, api_from: list[str], lb_address: str = "10.0.2.7") -> Inventory:
    doc: dict[str, Any] = {
        "version": 1,
        "bastions": {"jump": {"address": "198.51.100.10", "allow_ssh_from": ["203.0.113.0/24"],
                              "egress": ["10.0.0.5/32"], "security_groups": ["bastion"]}},
        "hosts": {
            "gpu1": {"address": "10.0.1.21", "via": "jump", "security_groups": ["gpu"],
                     "services": {"model-api": {"port": 8000, "bind": "0.0.0.0",
                                                "expose": {"from": ["10.0.2.7/32"]},
                                                "command": "/opt/venv/bin/api {port}"}}},
            "lb": {"address": lb_address, "via": "jump", "security_groups": ["lb"]},
        },
        "aws": {"region": "us-east-1", "security_groups": {
            "bastion": {"vpc": "vpc-0abc1234", "ingress": [{"port": 22, "from": ["203.0.113.0/24"]}]},
            "lb": {"vpc": "vpc-0abc1234", "ingress": [{"port": 22, "from": ["bastion"]}]},
            "gpu": {"vpc": "vpc-0abc1234", "ingress": [
                {"port": 22, "from": ["bastion"]}, {"port": 8000, "from": api_from}]}}},
    }
    path = tmp_path / "inv.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_inventory(path)


def unreachable(i: Inventory) -> list[str]:
    return [f.message for f in findings(i) if f.code == "sg-public-service-unreachable"]


def test_a_group_source_admits_its_machines_addresses(tmp_path: Path) -> None:
    # the load balancer's group admits it: its address is the service's declared source
    assert unreachable(inv(tmp_path, ["lb"])) == []
    # the same rule when lb sits elsewhere: the group no longer covers the declared source
    (msg,) = unreachable(inv(tmp_path, ["lb"], lb_address="10.0.3.9"))
    assert "unreachable from 10.0.2.7/32" in msg
    # a rule from a group that holds nobody admits nobody
    (msg,) = unreachable(inv(tmp_path, ["bastion"]))
    assert "unreachable from 10.0.2.7/32" in msg


PROBE = "\n".join([
    "probe\t1",
    'ltcp\tLISTEN 0 128 0.0.0.0:8000 0.0.0.0:* users:(("api",pid=7,fd=3))',
    "iptrc\t4\t0", "iptrc\t6\t0", "end", ""])


def test_audit_reach_through_a_group_reference_and_an_undeclared_id(tmp_path: Path) -> None:
    i = inv(tmp_path, ["lb"])
    host = i.node("gpu1")
    names = {"sg-0000000000000b001": "lb"}  # as audit maps live ids to inventory names
    rules = (JN.sg_rule(i, "gpu", "tcp", 8000, 8000, "sg-0000000000000b001", names),
             JN.sg_rule(i, "gpu", "tcp", 8000, 8000, "sg-00000000000000bad", names))
    assert rules[0].members == ("10.0.2.7/32",) and rules[0].declared
    assert rules[1].members == () and not rules[1].declared
    rep = LV.report(i, host, parse(PROBE), rules)
    port = next(p for p in rep.ports if p.port == 8000)
    assert port.v4.sources == ("10.0.2.7/32",)
    assert port.sg == "sg:lb, sg:sg-00000000000000bad (not declared)"
    declared = JN.declared_sg_rules(i, host)
    assert declared is not None
    assert [r.members for r in declared if r.peer == "lb"] == [("10.0.2.7/32",)]
