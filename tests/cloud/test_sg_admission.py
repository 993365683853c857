"""Which machines a plan may cut off from SSH, and the revert plan. Plain data, no AWS."""

from __future__ import annotations

from pathlib import Path

import yaml

from provision.cloud.admission import revert_attachment, revert_group, touched
from provision.cloud.attach import AttachPlan
from provision.cloud.rules import GroupPlan, LiveGroup, LiveRule, RuleKey
from provision.inventory import load_inventory
from provision.inventory.model import Inventory

VPC = "vpc-0abc1234"


def inv(tmp_path: Path) -> Inventory:
    doc = {"version": 1,
           "bastions": {"jump": {"address": "198.51.100.10", "allow_ssh_from": ["203.0.113.0/24"],
                                 "security_groups": ["bastion"], "aws": {"instance_id": "i-0123456789abcdef0"}}},
           "hosts": {"gpu1": {"address": "10.0.1.21", "via": "jump", "port": 2222, "security_groups": ["gpu"],
                              "aws": {}},
                     "gpu2": {"address": "10.0.1.22", "via": "jump", "security_groups": ["gpu"]}},
           "aws": {"region": "us-east-1", "security_groups": {
               "bastion": {"vpc": VPC, "ingress": [{"port": 22, "from": ["203.0.113.0/24"]}]},
               "gpu": {"vpc": VPC, "ingress": [{"port": 2222, "from": ["bastion"]}]}}}}
    path = tmp_path / "inv.yml"
    path.write_text(yaml.safe_dump(doc))
    return load_inventory(path)


def plan(name: str, *keys: RuleKey, revoke: tuple[RuleKey, ...] = ()) -> GroupPlan:
    return GroupPlan(name, "sg-00000000000000001", VPC, "", True,
                     revoke=tuple(LiveRule("sgr-1", k) for k in revoke), authorize=tuple((k, "") for k in keys))


def tcp(port: int, peer: str = "10.0.0.0/8") -> RuleKey:
    return RuleKey(False, "tcp", port, port, peer)


def test_touched_by_ssh_rules_on_the_machines_own_port_and_by_attachments(tmp_path: Path) -> None:
    i = inv(tmp_path)
    # gpu1's SSH is on 2222: a rule on 22 in its group does not touch it; on 2222 it does
    assert touched(i, [plan("gpu", tcp(22))], []) == []
    (t,) = touched(i, [plan("gpu", revoke=(tcp(2222),))], [])
    assert (t.machine, t.groups, t.attachment) == ("gpu1", ("gpu",), False)  # gpu2: no aws block
    # other ports never count, nor a machine's own egress; an attachment change always does
    egress = RuleKey(True, "tcp", 22, 22, "0.0.0.0/0")
    moved = AttachPlan("jump", "i-0123456789abcdef0", "eni-1", ("sg-1",), ("sg-2",))
    t, behind = touched(i, [plan("bastion", egress, tcp(443))], [moved])
    assert (t.machine, t.groups, t.attachment) == ("jump", (), True)
    assert t.why == "its attached groups"
    # ...but the bastion's egress on 22 carries gpu2's SSH (gpu1's is on 2222)
    assert (behind.machine, behind.groups, behind.attachment) == ("gpu2", ("bastion",), False)
    same = AttachPlan("jump", "i-0123456789abcdef0", "eni-1", ("sg-1", "sg-2"), ("sg-2", "sg-1"))
    assert touched(i, [], [same]) == []


def test_revert_puts_the_old_rules_back() -> None:
    old = LiveGroup("sg-1", "gpu", VPC, "", True, (LiveRule("sgr-a", tcp(22), "ssh"), LiveRule("sgr-b", tcp(80))))
    now = LiveGroup("sg-1", "gpu", VPC, "", True, (LiveRule("sgr-b", tcp(80)), LiveRule("sgr-c", tcp(23))))
    back = revert_group(old, now)
    assert [r.id for r in back.revoke] == ["sgr-c"]
    assert back.authorize == ((tcp(22), "ssh"),)
    a = AttachPlan("jump", "i-1", "eni-1", ("sg-1",), ("sg-2",))
    assert revert_attachment(a).want == ("sg-1",) and revert_attachment(a).current == ("sg-2",)


def test_a_bastions_egress_touches_the_hosts_behind_it(tmp_path: Path) -> None:
    """Revoking the bastion's egress to the hosts' SSH port cuts them off: confirmed (and
    reverted) like an ingress change, whether or not the host is an EC2 instance."""
    i = inv(tmp_path)
    out = RuleKey(True, "tcp", 2222, 2222, "10.0.0.0/8")
    (t,) = touched(i, [plan("bastion", revoke=(out,))], [])
    assert (t.machine, t.groups, t.attachment) == ("gpu1", ("bastion",), False)
    everything = RuleKey(True, "all", -1, -1, "0.0.0.0/0")
    assert [(t.machine, t.groups) for t in touched(i, [plan("bastion", revoke=(everything,))], [])] \
        == [("gpu1", ("bastion",)), ("gpu2", ("bastion",))]
    assert touched(i, [plan("gpu", revoke=(out,))], []) == []  # a host's own egress: not its SSH


def test_a_group_the_instance_had_before_touches_it(tmp_path: Path) -> None:
    """gpu1 is declared in gpu only; a stopped apply may leave it in old-gpu, whose SSH rule
    changes: it is touched through the group it had (`held`)."""
    old = GroupPlan("old-gpu", "sg-00000000000000009", VPC, "", True,
                    revoke=(LiveRule("sgr-9", tcp(2222)),))
    assert touched(inv(tmp_path), [old], []) == []
    hit = touched(inv(tmp_path), [old], [], {"gpu1": ("sg-00000000000000009",)})
    assert [(t.machine, t.groups) for t in hit] == [("gpu1", ("old-gpu",))]
