"""The deletion plan and the change-fraction guard, as plain data in and out (no AWS)."""

from __future__ import annotations

from provision.cloud.attach import AttachPlan
from provision.cloud.prune import DeletePlan, LiveInterface, dropped, guard, plan_deletions
from provision.cloud.rules import GroupPlan, LiveGroup, LiveRule, RuleKey

VPC = "vpc-0abc1234"


def group(gid: str, name: str, n: int, managed: bool = True, peer: str = "10.0.0.0/8",
          vpc: str = VPC) -> LiveGroup:
    rules = tuple(LiveRule(f"sgr-{gid[-4:]}{i:04d}", RuleKey(False, "tcp", 1000 + i, 1000 + i, peer))
                  for i in range(n))
    return LiveGroup(gid, name, vpc, name, managed, rules)


def revoking(g: LiveGroup, k: int) -> GroupPlan:
    return GroupPlan(g.name, g.id, g.vpc, g.description, g.managed, revoke=g.rules[:k])


def test_guard_counts_revokes_in_managed_groups_against_thirty_percent() -> None:
    a, b = group("sg-000000000000000a1", "a", 10), group("sg-000000000000000b1", "b", 10)
    live = [a, b]
    assert guard([revoking(a, 6), revoking(b, 0)], live, []) == ""  # 6 of 20
    why = guard([revoking(a, 6), revoking(b, 1)], live, [])  # 7 of 20 > 30 %
    assert why.startswith("the plan revokes 7 of the 20 managed rules (more than 30 %)")
    # a foreign group's rules are never revoked, so never counted
    foreign = group("sg-000000000000000c1", "c", 10, managed=False)
    assert guard([revoking(a, 3), GroupPlan("c", foreign.id, VPC, "c", False)], [a, foreign], []) == ""
    # a small account (fewer than 10 managed rules): the fraction does not apply, as in DNS
    small = group("sg-000000000000000d1", "d", 4)
    assert guard([revoking(small, 4)], [small], []) == ""


def test_any_deletion_needs_force() -> None:
    old = group("sg-000000000000000e1", "old", 1)
    assert "deletes 1 security group(s) (old)" in guard([], [old], [DeletePlan(old)])


def test_dropped_is_managed_in_our_vpcs_and_undeclared() -> None:
    ours = group("sg-000000000000000a1", "kept", 1)
    gone = group("sg-000000000000000a2", "gone", 1)
    foreign = group("sg-000000000000000a3", "legacy", 1, managed=False)
    elsewhere = group("sg-000000000000000a4", "other-vpc", 1, vpc="vpc-0def5678")
    plans = [GroupPlan("kept", ours.id, VPC, "", True)]
    assert dropped([ours, gone, foreign, elsewhere], plans, [VPC]) == [gone]


def test_holders_are_what_remains_after_the_rest_of_the_plan() -> None:
    gone = group("sg-000000000000000f1", "gone", 1)
    other = group("sg-000000000000000f2", "db", 2, peer=gone.id)
    nic_managed = LiveInterface("eni-1", "i-1", "", (gone.id,))
    nic_foreign = LiveInterface("eni-2", "", "ELB app", (gone.id,))
    detached = AttachPlan("gpu1", "i-1", "eni-1", (gone.id,), ("sg-000000000000000f3",))
    (d,) = plan_deletions([gone], [nic_managed, nic_foreign], [other], [revoking(other, 1)],
                          [detached], {"i-1": "gpu1"})
    # eni-1 is detached by this apply; one of db's two references is revoked by it
    assert d.holders == ("network interface eni-2 (ELB app)", f"1 rule(s) of group db ({other.id})")
    (d,) = plan_deletions([gone], [nic_managed], [], [], [], {"i-1": "gpu1"})
    assert d.holders == ("network interface eni-1 of instance i-1 (gpu1)",)
    assert "cannot delete gone (sg-000000000000000f1): still used by network interface eni-1" in d.error
    d, _ = plan_deletions([gone, other], [], [other], [], [], {})
    assert d.holders == ()  # the referencing group goes in the same apply
