"""Custom playbook steps against the lab's real hosts: `run:` shell steps with creates:/unless:
guards, and Python tasks with a check, through the bastion as the non-root login user.

The module works in a directory of its own (the inventory's tree): a copy of the lab's
inventory, the playbooks, and `tasks/*.py`. Every task and command appends a line to a
log on the host each time it really runs, so "did not run" is read on the host, not from
our own report. Everything it creates lives under STATE (and the login user's home) and is
removed at the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from .conftest import Lab

pytestmark = pytest.mark.lab

GPUS = ("gpu1", "gpu2")
STATE = "/var/lib/provision-test-steps"
USER_FILE = "provision-test-steps-user"  # in the login user's home (sudo: false)

TASKS = f'''
from provision.task import task

STATE = {STATE!r}


def cuda_done(c, host):
    return c.run(f"test -e {{STATE}}/cuda", warn=True).ok


@task(check=cuda_done)
def install_cuda(c, host):
    c.sudo(f"sh -c 'echo {{host.name}} >> {{STATE}}/runs; echo task > {{STATE}}/cuda'")


def fail_on_gpu2(c, host):
    if host.name == "gpu2":
        c.run("echo first line; echo 'boom from gpu2' >&2; exit 3")
    c.sudo(f"touch {{STATE}}/fail-ok")


fail_on_gpu2.check = lambda c, host: c.run(f"test -e {{STATE}}/fail-ok", warn=True).ok
'''

PLAYBOOK = f"""name: steps
hosts: all
steps:
  - name: state-dir
    run: mkdir -p {STATE} && echo state-dir >> {STATE}/runs
    creates: {STATE}
  - task: tasks/gpu.py:install_cuda
    name: cuda
  - name: as-login-user
    run: echo as-user >> ~/{USER_FILE}
    unless: test -s ~/{USER_FILE}
    sudo: false
"""

FAILING = f"""name: failing
hosts: all
steps:
  - run: mkdir -p {STATE}
    creates: {STATE}
  - tasks/gpu.py:fail_on_gpu2
  - name: gpu1-breaks
    run: |
      if [ "$(cat /etc/hostname)" = gpu1 ]; then
        echo 'output before'; echo 'bad thing on gpu1' >&2; exit 7
      fi
      touch {STATE}/shell-ok
    creates: {STATE}/shell-ok
"""


def _clean(lab: Lab, login: str) -> None:
    for h in GPUS:
        lab.host(h, "rm", "-rf", STATE, f"/home/{login}/{USER_FILE}", check=False)


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("steps")
    doc = yaml.safe_load(lab.inventory.read_text())
    doc["hosts"] = {h: {"address": doc["hosts"][h]["address"], "via": "bastion"} for h in GPUS}
    doc.pop("roles", None)
    doc.pop("dns", None)
    (d / "inventory.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    (d / "tasks").mkdir()
    (d / "tasks" / "gpu.py").write_text(TASKS)
    (d / "steps.yml").write_text(PLAYBOOK)
    (d / "failing.yml").write_text(FAILING)
    login = doc["defaults"]["user"]
    _clean(lab, login)
    yield {"dir": d, "login": login}
    _clean(lab, login)


def run(lab: Lab, world: dict[str, Any], *args: str,
        playbook: str = "steps.yml") -> tuple[int, dict[str, Any], str]:
    d = world["dir"]
    return lab.provision_json(*args, "-i", str(d / "inventory.yml"),
                              "--playbook", str(d / playbook))


def by_host(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["host"]: h for h in data["hosts"]}


def runs_log(lab: Lab, host: str) -> list[str]:
    r = lab.host(host, "cat", f"{STATE}/runs", check=False)
    return r.stdout.split()


def test_cold_plan_says_what_would_run_and_runs_nothing(lab: Lab, world: dict[str, Any]) -> None:
    code, data, err = run(lab, world, "plan", "--detailed-exitcode")
    assert code == 3, err + json.dumps(data, indent=1)
    assert [i["path"] for i in data["tasks_imported"]] == [
        str((world["dir"] / "tasks" / "gpu.py").resolve())]
    for h in GPUS:
        r = by_host(data)[h]
        assert r["status"] == "pending", r
        steps = {s["step"]: s for s in r["steps"]}
        assert steps["state-dir"] == {"step": "state-dir", "run": True,
                                      "why": f"{STATE} is absent"}
        assert steps["cuda"] == {"step": "cuda", "run": True, "why": "its check says not done"}
        assert steps["as-login-user"]["run"] is True
        assert "exited 1" in steps["as-login-user"]["why"], steps
        assert [a["step"] for a in r["actions"]] == ["state-dir", "cuda", "as-login-user"]
        # the probe (with both guards in it) and the check's one command
        assert r["remote_execs"] == 2, r
        assert lab.host(h, "test", "-e", STATE, check=False).returncode == 1  # plan ran nothing


def test_cold_apply_runs_them_then_a_no_op_apply_runs_nothing(
        lab: Lab, world: dict[str, Any]) -> None:
    code, data, err = run(lab, world, "apply", "--yes")
    assert code == 0, err + json.dumps(data, indent=1)
    assert "imported task code: " not in err  # --json: listed in the JSON, not on stderr
    for h in GPUS:
        r = by_host(data)[h]
        assert (r["status"], r["changed"]) == ("changed", 3), r
        assert runs_log(lab, h) == ["state-dir", h]
        home = f"/home/{world['login']}/{USER_FILE}"
        owner = lab.host(h, "stat", "-c", "%U", home).stdout.strip()
        assert owner == world["login"]  # sudo: false ran as the login user
    code, data, err = run(lab, world, "apply", "--yes")
    assert code == 0, err
    for h in GPUS:
        r = by_host(data)[h]
        assert (r["status"], r["changed"], r["changes"]) == ("ok", 0, 0), r
        assert r["remote_execs"] == 2, r  # the probe, and the task's check
        assert not any(s["run"] for s in r["steps"]), r["steps"]
        (section,) = [s for s in data["plan"]["sections"] if s["name"] == h]
        assert section["notes"] == [f"[state-dir] skipped: {STATE} exists",
                                    "[cuda] skipped: its check says done",
                                    f"[as-login-user] skipped: unless 'test -s ~/{USER_FILE}' "
                                    "exited 0"], section
        assert runs_log(lab, h) == ["state-dir", h]  # nothing ran a second time
        assert lab.host(h, "cat", f"/home/{world['login']}/{USER_FILE}").stdout == "as-user\n"


def test_a_failing_task_or_command_fails_only_its_host(lab: Lab, world: dict[str, Any]) -> None:
    code, data, err = run(lab, world, "apply", "--yes", playbook="failing.yml")
    assert code == 1, err
    hosts = by_host(data)
    g1, g2 = hosts["gpu1"], hosts["gpu2"]
    # gpu2: its task raised (the command's exit status and last output lines in the recap)
    assert g2["status"] == "failed", g2
    assert "fail_on_gpu2" in g2["error"] and "exited 3" in g2["error"], g2
    assert "boom from gpu2" in g2["error"], g2
    assert g2["changed"] == 0 and g2["failed_action"].startswith("run task "), g2
    for left in ("fail-ok", "shell-ok"):  # nothing after the failure ran on gpu2
        assert lab.host("gpu2", "test", "-e", f"{STATE}/{left}", check=False).returncode == 1
    # gpu1: the task ran; the shell step after it failed with its own output
    assert (g1["status"], g1["changed"]) == ("failed", 1), g1
    assert lab.host("gpu1", "test", "-e", f"{STATE}/fail-ok").returncode == 0
    assert "exit 7" in g1["error"] and "bad thing on gpu1" in g1["error"], g1
    assert g1["failed_action"].startswith("run "), g1
