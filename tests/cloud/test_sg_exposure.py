"""What a stopped `sg apply` leaves an instance admitting beyond both the state before and
the declared one (`provision.cloud.exposure`), the recap that names it, and the order of
the changes that keeps it empty. Plain data, no AWS."""

from __future__ import annotations

from provision.cloud.apply import Progress, Unit, _changes
from provision.cloud.attach import AttachPlan, LiveInstance
from provision.cloud.exposure import wider
from provision.cloud.plan import SgPlan
from provision.cloud.rules import GroupPlan, LiveGroup, LiveRule, RuleKey
from provision.commands.sg_stop import interrupted_line

VPC = "vpc-0abc1234"
A, B, C = "sg-000000000000000aa", "sg-000000000000000bb", "sg-000000000000000cc"
OFFICE = "203.0.113.0/24"


def tcp(port: int, peer: str) -> RuleKey:
    return RuleKey(False, "tcp", port, port, peer)


def group(gid: str, name: str, *keys: RuleKey) -> LiveGroup:
    return LiveGroup(gid, name, VPC, "", True, tuple(LiveRule(f"sgr-{i}", k) for i, k in enumerate(keys)))


BEFORE = (group(A, "team-a", tcp(8888, OFFICE)), group(C, "team-c", tcp(8888, OFFICE)))
# team-a widens 8888 to anywhere (for its other members); gpu1 moves from team-a to team-c
WIDEN = GroupPlan("team-a", A, VPC, "", True, revoke=(BEFORE[0].rules[0],),
                  authorize=((tcp(8888, "0.0.0.0/0"), ""),))
MOVE = AttachPlan("gpu1", "i-0000000000000001", "eni-1", (A,), (C,))
WIDENED = (group(A, "team-a", tcp(8888, "0.0.0.0/0")), BEFORE[1])


def instance(*groups: str) -> LiveInstance:
    return LiveInstance("i-0000000000000001", VPC, "10.0.1.21", "eni-1", groups)


def test_an_instance_left_in_the_group_that_widened_is_named() -> None:
    got = wider([WIDEN], [MOVE], BEFORE, WIDENED, [instance(A)])
    assert [w.text({A: "team-a"}) for w in got] == ["gpu1 admits ingress tcp 8888 from 0.0.0.0/0"]


def test_the_declared_state_and_the_state_before_are_not_named() -> None:
    assert wider([WIDEN], [MOVE], BEFORE, WIDENED, [instance(C)]) == []  # declared
    assert wider([WIDEN], [MOVE], BEFORE, BEFORE, [instance(A)]) == []  # before
    narrowed = (group(A, "team-a"), BEFORE[1])  # revokes sent, nothing else
    assert wider([WIDEN], [MOVE], BEFORE, narrowed, [instance(A)]) == []


# the database group admits team-c; the plan moves gpu1 into team-c and takes team-c's
# access to the database away: neither state lets gpu1 reach the database
DB_BEFORE = (*BEFORE, group(B, "db", tcp(5432, C)))
CUT = GroupPlan("db", B, VPC, "", True, revoke=(DB_BEFORE[2].rules[0],))


def test_an_instance_another_group_now_admits_through_its_new_group_is_named() -> None:
    # stopped after the move, before db's revoke (a failed revoke, or a hand-made rule)
    got = wider([CUT], [MOVE], DB_BEFORE, DB_BEFORE, [instance(C)])
    assert [w.text({A: "team-a", B: "db", C: "team-c"}) for w in got] == [
        "gpu1 is admitted by the members of db: ingress tcp 5432 from group team-c "
        "(sg-000000000000000cc)"]
    assert got[0].admitted_by == B and got[0].key == tcp(5432, C)


def test_what_another_group_admits_in_either_state_is_not_named() -> None:
    revoked = (*BEFORE, group(B, "db"))
    assert wider([CUT], [MOVE], DB_BEFORE, revoked, [instance(C)]) == []  # declared
    assert wider([CUT], [MOVE], DB_BEFORE, DB_BEFORE, [instance(A)]) == []  # before
    # not moving: db admitting team-c stays as it was; gpu1 already in team-c reached it
    stay = AttachPlan("gpu1", "i-0000000000000001", "eni-1", (C,), (C,))
    assert wider([], [stay], DB_BEFORE, DB_BEFORE, [instance(C)]) == []
    # a group the plan does not declare counts as it was before: its rule is the before
    # state's, so moving into team-c by the plan makes it declared, not wider
    assert wider([], [MOVE], DB_BEFORE, DB_BEFORE, [instance(C)]) == []


def test_with_instances_moving_revokes_come_first_and_authorizes_last() -> None:
    narrow = GroupPlan("team-c", C, VPC, "", True, revoke=(BEFORE[1].rules[0],))
    order = [(u.kind, u.name) for u, _ in _changes(SgPlan((WIDEN, narrow), (MOVE,)))]
    assert order == [("revoke", "team-a"), ("revoke", "team-c"), ("attach", "gpu1"),
                     ("rules", "team-a")]
    parts = [item for _, item in _changes(SgPlan((WIDEN, narrow), (MOVE,)))]
    assert isinstance(parts[0], GroupPlan) and parts[0].authorize == () and parts[0].revoke
    assert isinstance(parts[3], GroupPlan) and parts[3].revoke == () and parts[3].authorize
    # no instance moving: each group's rules stay one change, as before
    assert [(u.kind, u.name) for u, _ in _changes(SgPlan((WIDEN,)))] == [("rules", "team-a")]


def test_the_recap_names_what_is_wider_and_a_failed_rollback() -> None:
    p = Progress(done=[Unit("rules", "team-a")], not_applied=[Unit("attach", "gpu1")],
                 wider=["gpu1 admits ingress tcp 8888 from 0.0.0.0/0"], interrupted=True)
    assert interrupted_line(p) == (
        "interrupted (Ctrl-C): changed: rules of group team-a; not applied: groups of instance "
        "gpu1; now admitting more than before and than declared: gpu1 admits ingress tcp 8888 "
        "from 0.0.0.0/0; run sg apply again to finish")
    left = Progress(left=["group web (sg-1) created, not deleted again (delete it by hand)"])
    assert interrupted_line(left) == (
        "interrupted (Ctrl-C): changed: group web (sg-1) created, not deleted again (delete it "
        "by hand); run sg apply again to finish")
