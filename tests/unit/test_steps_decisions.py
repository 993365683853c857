"""The plan decisions of the custom steps, from fixture data (tests/fixtures/steps/).

`run/<case>.json`: a shell step as written in a playbook, the login user, and what the
probe answered for its guards (`c`: the creates check, `u`: the unless command's exit
status); expected: run or not, why, and as whom. The step goes through the real playbook
parser, its request through the real probe parser.
`task/<case>.json`: whether a Python task has a check and what it answered.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.facts import FactsError, parse
from provision.playbook import parse as parse_playbook
from provision.steps import python_task as pytask
from provision.steps.command import RunCommand, ShellStep
from tests.support.converge_cases import inventory

FIX = Path(__file__).parent.parent / "fixtures" / "steps"


def _cases(kind: str) -> list[Any]:
    return [pytest.param(json.loads(p.read_text()), id=p.stem)
            for p in sorted((FIX / kind).glob("*.json"))]


def _answer(step: ShellStep, answers: dict[str, int]) -> str:
    """The probe's answer for `step`'s guards: one record per guard it asked for."""
    lines = ["probe\t1"]
    for arg in step.request().args():
        _, gid, kind, _user, _value = arg.split(":", 4)
        if kind in answers:
            lines.append(f"guard\t{gid}\t{answers[kind]}")
    return "\n".join([*lines, "end", ""])


@pytest.mark.parametrize("case", _cases("run"))
def test_shell_step_decision(case: dict[str, Any]) -> None:
    inv, host = inventory()
    host = dataclasses.replace(host, user=case.get("login", "admin"))
    pb = parse_playbook(yaml.safe_dump({"hosts": "all", "steps": [case["step"]]}), "case.yml")
    (step,) = pb.build(inv, host)
    assert isinstance(step, ShellStep)
    facts = parse(_answer(step, case["answers"]))
    want = case["expect"]
    if "error" in want:
        with pytest.raises(FactsError, match=want["error"]):
            step.diff(facts)
        return
    d = step.decision(facts)
    assert (d.run, d.why) == (want["run"], want["why"])
    actions = step.diff(facts)
    if not want["run"]:
        assert actions == []
        return
    (a,) = actions
    assert isinstance(a, RunCommand)
    assert (a.command, a.user, a.why) == (case["step"]["run"], want["user"], want["why"])


@pytest.mark.parametrize("case", _cases("task"))
def test_task_step_decision(case: dict[str, Any]) -> None:
    inv, host = inventory()
    spec = pytask.TaskSpec("t", "tasks/t.py", "t", "x.yml:3:5")
    loaded = pytask.Loaded(lambda c, h: None, (lambda c, h: True) if case["has_check"] else None,
                           "/inv/tasks/t.py")
    step = pytask.build(spec, loaded, inv, host)
    if case["done"] is not None:
        step = step.checked(case["done"])
    d = step.decision(parse("probe\t1\nend\n"))
    assert (d.run, d.why) == (case["expect"]["run"], case["expect"]["why"])
    assert len(step.diff(parse("probe\t1\nend\n"))) == int(case["expect"]["run"])


def test_a_task_with_a_check_is_never_decided_unchecked() -> None:
    inv, host = inventory()
    spec = pytask.TaskSpec("t", "tasks/t.py", "t")
    step = pytask.build(spec, pytask.Loaded(lambda c, h: None, lambda c, h: True, "/x"), inv, host)
    with pytest.raises(TypeError, match="check was not called"):
        step.diff(parse("probe\t1\nend\n"))
    with pytest.raises(TypeError, match="not loaded"):
        pytask.build(spec, None, inv, host)


def test_the_same_guard_in_two_steps_is_asked_once() -> None:
    inv, host = inventory()
    pb = parse_playbook("hosts: all\nsteps:\n  - {run: a, unless: test -e /x}\n"
                        "  - {run: b, unless: test -e /x}\n  - {run: c, unless: test -e /y}\n",
                        "x.yml")
    request = pb.build(inv, host)[0].request()
    for s in pb.build(inv, host)[1:]:
        request = request.merge(s.request())
    assert len(request.guards) == 2
    assert request.spec_names() == {"guards"}
