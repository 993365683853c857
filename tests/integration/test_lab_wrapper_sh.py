"""The lab's container wrapper script run by a real sh with stand-ins: its own cgroup per
container, every cgroup joined, then nspawn exec'd."""

from __future__ import annotations

from pathlib import Path

from provision.lab import plan as P


def test_each_container_gets_its_own_cgroup_and_the_wrapper_execs_nspawn() -> None:
    import subprocess

    plan = P.make_plan("cg", gpus=2, venv="/v", repo=None)
    paths = {P.cgroup_of(plan, n) for n in plan.containers}
    assert len(paths) == len(plan.containers)
    assert all(p.startswith(f"{P.CGROUP_PARENT}/cg/") for p in paths)
    assert P.in_cgroups(["x"], []) == ["x"]
    cmd = P.in_cgroups(["echo", "ran", "--", "$1"], ["/nonexistent-a"])
    # a cgroup it cannot join: exit 125 before running anything
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 125 and "ran" not in r.stdout


def test_the_wrapper_joins_every_cgroup_then_runs_the_command(tmp_path: Path) -> None:
    import subprocess

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    r = subprocess.run(P.in_cgroups(["echo", "ran", "--", "$1"], [str(a), str(b)]),
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "ran -- $1\n"
    pid = (a / "cgroup.procs").read_text().strip()
    assert pid and pid == (b / "cgroup.procs").read_text().strip()
