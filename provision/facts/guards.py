"""Fact: the guards of shell steps (`creates:` and `unless:`), evaluated inside the one probe.
Pure parser.

An argument `G:ID:KIND:USER:VALUE` asks for one guard: KIND `c` (VALUE is a path: 0 when
it exists, 1 when not) or `u` (VALUE is a command: its exit status, run as USER when
given, else as root, stdin from /dev/null, output discarded). The answer is one
`guard<TAB>ID<TAB>STATUS` record per guard; ID is the guard's digest
(`provision.steps.command.guard_id`), so the same guard asked by two steps runs once.
"""

from __future__ import annotations

from collections.abc import Sequence

from .spec import FactsError, FactSpec, Rec, number

GUARD_TIMEOUT = 60  # seconds an `unless:` command may take in the probe (status 124 after)


def parse(records: Sequence[Rec]) -> dict[str, int]:
    """{guard id: exit status}."""
    out: dict[str, int] = {}
    for r in records:
        status = number(r.fields[1], 255) if len(r.fields) == 2 else None
        if status is None or not r.fields[0].isalnum():
            raise FactsError(f"line {r.line}: malformed guard record")
        out[r.fields[0]] = status
    return out


SPEC = FactSpec("guards", ("guard",), parse)
