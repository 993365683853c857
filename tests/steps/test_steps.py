"""Every step against its fixtures: `tests/steps/<step>/<case>.json`, inventory and facts in,
planned actions and script lines out.

Inputs: `inventory` (a path under tests/fixtures, or an inline inventory document), `host`
(default: the inventory's first host), `records` (the probe's answer lines, as in the fact
fixtures). Outputs, each optional but at least one: `request` (the probe arguments the step
asks for), `actions` (the planned actions as plain JSON, `type` first; `[]` is "no changes"),
`refused` (a regular expression the step's `Refused` must match), `script` (`{"grep": REGEX,
"lines": [...]}`: the lines of the generated script where REGEX matches, all of them, in
order; a commit-confirmed action's script is its apply script). docs/CONTRIBUTING.md says how to add a step.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.facts import parse
from provision.inventory import load_inventory
from provision.inventory.model import Inventory
from provision.steps import commit, script
from provision.steps.commit import CommitConfirmed
from provision.steps.registry import STEPS
from provision.steps.step import Planned, Refused
from tests.support import cases
from tests.support.plain import plain
from tests.support.probe_records import expand, wrap

HERE = Path(__file__).parent
FIXTURES = HERE.parent / "fixtures"
OUTPUTS = ("request", "actions", "refused", "script")
COMMIT_ID = "fixture"  # the commit id the script of a commit-confirmed action is built with


def inventory(spec: str | dict[str, Any], tmp_path: Path) -> Inventory:
    if isinstance(spec, str):
        return load_inventory(FIXTURES / spec)
    path = tmp_path / "inventory.yml"  # loaded like a file, so it is validated like one
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return load_inventory(path)


def script_of(planned: Sequence[Planned]) -> str:
    plain_actions = [a for a in planned if not isinstance(a, CommitConfirmed)]
    parts = [script.build(plain_actions)] if plain_actions else []
    parts += [commit.apply_script(a, COMMIT_ID, 60) for a in planned if isinstance(a, CommitConfirmed)]
    return "\n".join(parts)


@pytest.mark.parametrize("path", cases.params(HERE))
def test_step(path: Path, tmp_path: Path) -> None:
    case = cases.load(path, ("inventory", "host", "records", *OUTPUTS))
    name = path.parent.name
    assert name in STEPS, f"{name}: not a registered step (STEPS in provision/steps/registry.py)"
    assert any(k in case for k in OUTPUTS), f"{path}: give at least one of {', '.join(OUTPUTS)}"
    assert not ("refused" in case and ("actions" in case or "script" in case)), (
        f"{path}: a refused case plans nothing")
    inv = inventory(case["inventory"], tmp_path)
    host = inv.node(case["host"]) if "host" in case else inv.hosts[0]
    step = STEPS[name](inv, host)
    got: dict[str, Any] = {}
    if "request" in case:
        got["request"] = step.request().args()
    facts = parse(wrap(expand(case.get("records", []))))
    if not {"refused", "actions", "script"} & set(case):
        pass  # a request-only case
    elif "refused" in case:
        with pytest.raises(Refused, match=case["refused"]):
            step.diff(facts)
    else:
        planned = step.diff(facts)
        got["actions"] = plain(planned, typed=True)
        if "script" in case:
            grep = case["script"]["grep"]
            lines = [ln for ln in script_of(planned).splitlines() if re.search(grep, ln)]
            got["script"] = {"grep": grep, "lines": lines}
    if cases.UPDATE:
        case = cases.update(path, case, **{k: v for k, v in got.items() if k in case})
    for key, value in got.items():
        if key in case:
            assert value == case[key], f"{path.name}: {key} differs (UPDATE_FIXTURES=1 to regenerate)"


def test_every_fixture_folder_is_a_registered_step() -> None:
    unknown = cases.folders(HERE) - set(STEPS)
    assert not unknown, f"fixture folders naming no registered step: {sorted(unknown)}"


def test_every_registered_step_has_fixtures() -> None:
    bare = {name for name in STEPS if not list((HERE / name).glob("*.json"))}
    assert not bare, f"registered steps without fixtures in tests/steps/: {sorted(bare)}"
