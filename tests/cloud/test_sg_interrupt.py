"""Ctrl-C during `sg apply`, sent to a real CLI process against moto over HTTP at a point the
process is held at for sure (faults.py `--hold-dir`: `sg-create`, `sg-rules-GROUP`,
`sg-delete-GROUP`, as each change starts): the change in flight finishes (groups being
created are deleted again), no other starts, the recap says what was changed, rolled back
and not applied, exit 130; a second Ctrl-C leaves at once, saying what may be half-way.
What AWS holds is read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cloud.test_sg_moto import apply, base_groups, ec2, inventory
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
