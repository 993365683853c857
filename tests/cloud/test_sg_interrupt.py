"""Ctrl-C during `sg apply`, sent to a real CLI process against moto over HTTP at a point the
process is held at for sure (faults.py `--hold-dir`: `sg-create`, `sg-rules-GROUP`,
`sg-delete-GROUP`, as each change starts): the change in flight finishes (groups being
created are deleted again), no other starts, the recap says what was changed, rolled back
and not applied, exit 130; a second Ctrl-C leaves at once, saying what may be half-way.
What AWS holds is read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cloud.test_sg_attach_moto import attached_inventory, groups_of, instance
from tests.cloud.test_sg_moto import OFFICE, apply, base_groups, ec2, hook_ec2, inventory
from tests.support.sigint import Proc


def _groups(vpc: str) -> dict[str, dict[str, Any]]:
    got = ec2().describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [vpc]}])
    return {g["GroupName"]: g for g in got["SecurityGroups"] if g["GroupName"] != "default"}


def _ports(group: dict[str, Any]) -> set[int]:
    return {p.get("FromPort", -1) for p in group["IpPermissions"]}


def _sg_apply(inv: Path, hold: Path, *extra: str) -> Proc:
    # `--no-confirm`: the inventory's machines are addresses of the documentation ranges,
    # never dialled; the SSH confirmation phase is tests/cloud/test_sg_attach_moto.py's
    return Proc(["--hold-dir", str(hold), "--", "sg", "apply", "-i", str(inv), "--yes",
                 "--no-confirm", *extra])


def test_ctrl_c_while_groups_are_created_deletes_them_again(aws_env: str, vpc: str,
                                                             tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    hold.mkdir()
    run = _sg_apply(inventory(tmp_path, vpc), hold)
    try:
        run.reach(hold / "sg-create.reached")
        run.interrupt()
        line = run.said("stopping:")
        assert "1 change finishing (create groups bastion-sg, gpu-servers)" in line
        assert "2 changes not started" in line
        (hold / "sg-create.go").touch()
        code, err, out = run.finish()
    finally:
        run.kill()
    assert code == 130, err
    assert "rolled back: " in out  # each deletion said as it happens
    assert ("interrupted (Ctrl-C): nothing changed; rolled back: group bastion-sg (sg-" in err
            and "not applied: rules of group bastion-sg, rules of group gpu-servers; "
                "run sg apply again to finish" in err), err
    assert "Aborted!" not in err and "Traceback" not in err
    assert not list(hold.glob("sg-rules-*.reached"))  # no rule was started
    assert _groups(vpc) == {}  # what AWS really holds: nothing half-made


def test_ctrl_c_during_a_groups_rules_finishes_them_and_starts_no_other(
        aws_env: str, vpc: str, tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    hold.mkdir()
    run = _sg_apply(inventory(tmp_path, vpc), hold)
    try:
        (hold / "sg-create.go").touch()
        run.reach(hold / "sg-rules-bastion-sg.reached")
        run.interrupt()
        assert "1 change finishing (rules of group bastion-sg)" in run.said("stopping:")
        (hold / "sg-rules-bastion-sg.go").touch()
        code, err, _ = run.finish()
    finally:
        run.kill()
    assert code == 130, err
    assert ("interrupted (Ctrl-C): changed: create groups bastion-sg, gpu-servers, rules of "
            "group bastion-sg; not applied: rules of group gpu-servers; run sg apply again"
            in err), err
    assert not (hold / "sg-rules-gpu-servers.reached").exists()
    live = _groups(vpc)
    assert _ports(live["bastion-sg"]) == {22}  # finished
    assert _ports(live["gpu-servers"]) == set()  # never started
    assert apply(inventory(tmp_path, vpc)).exit_code == 0  # the next apply finishes it
    assert _ports(_groups(vpc)["gpu-servers"]) == {22, 443, 60000, -1}


def test_ctrl_c_before_a_deletion_leaves_the_group(aws_env: str, vpc: str,
                                                  tmp_path: Path) -> None:
    groups = base_groups(vpc)
    groups["old-api"] = {"vpc": vpc, "ingress": [{"port": 8080, "from": ["10.0.0.0/8"]}]}
    groups["old-web"] = {"vpc": vpc, "ingress": [{"port": 8081, "from": ["10.0.0.0/8"]}]}
    assert apply(inventory(tmp_path, vpc, groups), "--no-confirm").exit_code == 0
    del groups["old-api"], groups["old-web"]
    hold = tmp_path / "hold"
    hold.mkdir()
    run = _sg_apply(inventory(tmp_path, vpc, groups), hold, "--force")
    try:
        run.reach(hold / "sg-delete-old-api.reached")
        run.interrupt()
        assert "1 change finishing (delete group old-api), 1 change not started" in run.said(
            "stopping:")
        (hold / "sg-delete-old-api.go").touch()
        code, err, _ = run.finish()
    finally:
        run.kill()
    assert code == 130, err
    assert ("interrupted (Ctrl-C): changed: delete group old-api; not applied: delete group "
            "old-web; run sg apply again to finish" in err), err
    assert set(_groups(vpc)) == {"bastion-sg", "gpu-servers", "old-web"}


def test_second_ctrl_c_leaves_at_once_saying_what_may_be_half_way(
        aws_env: str, vpc: str, tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    hold.mkdir()
    run = _sg_apply(inventory(tmp_path, vpc), hold)
    try:
        (hold / "sg-create.go").touch()
        run.reach(hold / "sg-rules-bastion-sg.reached")
        run.interrupt()
        run.said("stopping:")
        run.interrupt()  # still held: never let go
        code, err, _ = run.finish()
    finally:
        run.kill()
    assert code == 130, err
    assert "leaving now; what may be half-way:" in err
    assert "rules of group bastion-sg: AWS takes each revoke and authorize call on its own" in err
    assert "interrupted (Ctrl-C):" not in err  # no recap: it left at once
    assert _ports(_groups(vpc)["bastion-sg"]) == set()  # held before its rules were sent


# --- an instance moving out of a group that widens (security review, finding A) -----------

def _net(vpc: str) -> tuple[str, str]:
    """The bastion's and gpu1's instances in `vpc` (gpu1 found by its private address)."""
    subnet = ec2().create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    return instance(subnet, "10.0.1.10"), instance(subnet, "10.0.1.21")


def _moving(tmp_path: Path, vpc: str, jump: str) -> Path:
    """Before: gpu1 in team-a, which admits 8888 from the office only. Declared: team-a
    admits 8888 from anywhere (for its other members), and gpu1 moves to team-c."""
    groups = base_groups(vpc)
    groups["team-a"] = {"vpc": vpc, "ingress": [{"port": 8888, "from": [OFFICE]}]}
    groups["team-c"] = {"vpc": vpc, "ingress": [{"port": 8888, "from": [OFFICE]}]}
    done = apply(attached_inventory(tmp_path, vpc, jump, groups, ("gpu-servers", "team-a")),
                 "--no-confirm")
    assert done.exit_code == 0, done.output
    groups["team-a"]["ingress"] = [{"port": 8888, "from": ["0.0.0.0/0"]}]
    return attached_inventory(tmp_path, vpc, jump, groups, ("gpu-servers", "team-c"))


def _admits_8888(instance_id: str) -> set[str]:
    """The sources gpu1's groups admit TCP 8888 from, as AWS holds them now."""
    wanted = groups_of(instance_id)
    return {r["CidrIp"] for name, g in _groups(_vpc_of(instance_id)).items() if name in wanted
            for p in g["IpPermissions"] if p.get("FromPort") == 8888 for r in p["IpRanges"]}


def _vpc_of(instance_id: str) -> str:
    res = ec2().describe_instances(InstanceIds=[instance_id])["Reservations"]
    return str(res[0]["Instances"][0]["VpcId"])


def test_ctrl_c_before_a_group_widens_leaves_no_leaving_member_in_it(
        aws_env: str, vpc: str, tmp_path: Path) -> None:
    """Held as team-a's widening starts, Ctrl-C: gpu1 has already left team-a (before the
    fix, every group's rules came before any attachment: gpu1 stayed in team-a, open to
    0.0.0.0/0 on 8888, more than before and than declared)."""
    jump, gpu = _net(vpc)
    inv = _moving(tmp_path, vpc, jump)
    hold = tmp_path / "hold"
    hold.mkdir()
    run = _sg_apply(inv, hold)
    try:
        (hold / "sg-revoke-team-a.go").touch()  # the hold points before it (with the fix)
        (hold / "sg-attach-gpu1.go").touch()
        run.reach(hold / "sg-rules-team-a.reached")
        run.interrupt()
        run.said("stopping:")
        (hold / "sg-rules-team-a.go").touch()
        code, err, _ = run.finish()
    finally:
        run.kill()
    assert code == 130, err
    assert "0.0.0.0/0" not in _admits_8888(gpu), groups_of(gpu)  # read back from AWS
    assert groups_of(gpu) == {"gpu-servers", "team-c"}
    assert (hold / "sg-revoke-team-a.reached").exists()  # narrowed first
    assert (hold / "sg-attach-gpu1.reached").exists()  # then moved, before the widening
    assert "now admitting more" not in err, err
    assert "changed: revokes in group team-a, groups of instance gpu1, rules of group team-a" in err


def test_ctrl_c_as_gpu1_moves_leaves_it_admitting_no_more_than_before(
        aws_env: str, vpc: str, tmp_path: Path) -> None:
    """Held at gpu1's attachment (after team-a's revokes), Ctrl-C: it moves, team-a's
    widening is not applied; gpu1 admits 8888 from the office at most."""
    jump, gpu = _net(vpc)
    inv = _moving(tmp_path, vpc, jump)
    hold = tmp_path / "hold"
    hold.mkdir()
    run = _sg_apply(inv, hold)
    try:
        (hold / "sg-revoke-team-a.go").touch()
        run.reach(hold / "sg-attach-gpu1.reached")
        run.interrupt()
        assert "1 change finishing (groups of instance gpu1)" in run.said("stopping:")
        (hold / "sg-attach-gpu1.go").touch()
        code, err, _ = run.finish()
    finally:
        run.kill()
    assert code == 130, err
    assert not (hold / "sg-rules-team-a.reached").exists()
    assert "not applied: rules of group team-a" in err, err
    assert _admits_8888(gpu) <= {OFFICE}
    assert "now admitting more" not in err, err


def test_a_failing_attachment_leaves_the_group_it_stays_in_not_widened(
        aws_env: str, vpc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS refuses gpu1's attachment (injected): it stays in team-a, which must not be
    widened yet (before the fix: widened first, then the refusal)."""
    from botocore.exceptions import ClientError

    jump, gpu = _net(vpc)
    inv = _moving(tmp_path, vpc, jump)

    def refuse(params: dict[str, Any], **_: Any) -> None:
        raise ClientError({"Error": {"Code": "InternalError", "Message": "try later"}},
                          "ModifyNetworkInterfaceAttribute")

    hook_ec2(monkeypatch, "before-call.ec2.ModifyNetworkInterfaceAttribute", refuse)
    result = apply(inv, "--no-confirm")
    out = " ".join(result.output.split())
    assert result.exit_code == 1, out
    assert "try later" in out, out
    assert "team-a" in groups_of(gpu)  # it stayed
    assert "0.0.0.0/0" not in _admits_8888(gpu)  # and what it stayed in was not widened
    assert "now admitting more" not in out, out


# --- what the recap says when the stop is not clean (finding B) ----------------------------

def _captured_stop(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Ctrl-C pressed (the handler called, as SIGINT would) as the first change of `kind`
    starts: in-process, so the SSH confirmation and AWS refusals can be stood in for."""
    from provision.cloud import apply as engine
    from provision.commands import sg as sg_cmd
    from provision.interrupt import Stop

    made: list[Stop] = []

    class Captured(Stop):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            made.append(self)

    def press(unit: Any) -> None:
        if unit.kind == kind and not made[0].requested:
            made[0].press()

    monkeypatch.setattr(sg_cmd, "Stop", Captured)
    monkeypatch.setattr(engine, "begin", press)


def test_ssh_not_confirmed_after_ctrl_c_still_says_what_was_not_applied(
        aws_env: str, vpc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.hosts import confirm as confirm_mod

    jump, gpu = _net(vpc)
    inv = _moving(tmp_path, vpc, jump)
    _captured_stop(monkeypatch, "attach")
    monkeypatch.setattr(confirm_mod, "confirm", lambda *a, **k: confirm_mod.Confirmation(
        [None], "no answer", 0.1))
    result = apply(inv)
    out = " ".join(result.output.split())
    assert result.exit_code == 1, out
    assert "no new SSH connection within" in out, out
    assert ("interrupted (Ctrl-C): changed: revokes in group team-a, groups of instance gpu1; "
            "not applied: rules of group team-a") in out, out
    assert groups_of(gpu) == {"gpu-servers", "team-a"}  # its attachment reverted


def test_a_failed_rollback_after_ctrl_c_is_named_as_a_change(
        aws_env: str, vpc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import ClientError

    _captured_stop(monkeypatch, "create")

    def refuse(params: dict[str, Any], **_: Any) -> None:
        raise ClientError({"Error": {"Code": "InternalError", "Message": "try later"}},
                          "DeleteSecurityGroup")

    hook_ec2(monkeypatch, "before-call.ec2.DeleteSecurityGroup", refuse)
    result = apply(inventory(tmp_path, vpc))
    out = " ".join(result.output.split())
    assert result.exit_code == 130, out
    assert "nothing changed" not in out, out
    left = _groups(vpc)
    assert set(left) == {"bastion-sg", "gpu-servers"}  # what AWS holds: they stayed
    for name, g in left.items():
        assert f"group {name} ({g['GroupId']}) created, not deleted again (delete it by hand)" in out
    assert "interrupted (Ctrl-C): changed: group bastion-sg (" in out, out
