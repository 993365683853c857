"""Every fact against its fixtures: `tests/facts/<fact>/<case>.json`, records in, value out.

A case holds `records` (the probe's answer lines; see `tests.support.probe_records.expand`
for the builders) and either `value` (the fact's parsed value as plain JSON, see
`tests.support.plain`) or `error` (a regular expression the `FactsError` must match). The
whole answer goes through `provision.facts.parse`, so the framing, the text checks and the
routing of record kinds to their fact are exercised too. docs/CONTRIBUTING.md says how to add
a fact.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.facts import FactsError, parse
from provision.facts.registry import BY_NAME
from tests.support import cases
from tests.support.plain import plain
from tests.support.probe_records import expand, wrap

HERE = Path(__file__).parent


@pytest.mark.parametrize("path", cases.params(HERE))
def test_fact(path: Path) -> None:
    case = cases.load(path, ("records", "value", "error"))
    fact = path.parent.name
    assert fact in BY_NAME, f"{fact}: not a registered fact (provision/facts/registry.py)"
    assert ("value" in case) != ("error" in case), f"{path}: give `value` or `error`"
    text = wrap(expand(case["records"]))
    if "error" in case:
        with pytest.raises(FactsError, match=case["error"]):
            parse(text)
        return
    got = plain(parse(text).values[fact], properties=True)
    if cases.UPDATE:
        case = cases.update(path, case, value=got)
    assert got == case["value"]


def test_every_fixture_folder_is_a_registered_fact() -> None:
    unknown = cases.folders(HERE) - set(BY_NAME)
    assert not unknown, f"fixture folders naming no registered fact: {sorted(unknown)}"


def test_every_registered_fact_has_fixtures() -> None:
    bare = {name for name in BY_NAME if not list((HERE / name).glob("*.json"))}
    assert not bare, f"registered facts without fixtures in tests/facts/: {sorted(bare)}"
