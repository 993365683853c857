"""The one probe per host: the requested facts' fragments as one POSIX sh script, and the
parse of its answer into `Facts`. Pure: reads the fragments from the templates package,
runs nothing (the shell layer, `provision.hosts.gather`, sends it over SSH).

The script is a function called on its last line, so a script cut short in transit never
runs. Its answer starts with `probe<TAB>1`, ends with `end`, and holds one record per line
(`kind<TAB>fields...`); each record goes to the spec that owns its kind.
"""

from __future__ import annotations

import functools
from importlib.resources import files
from typing import Any

from .registry import BY_NAME, SPECS
from .result import Facts
from .spec import FactsError, Rec, Request

HEADER = "probe\t1"


@functools.cache
def _fragment(name: str) -> str:
    return (files("provision._templates") / "facts" / f"{name}.sh").read_text("utf-8")


def probe_script(request: Request | None = None) -> str:
    """The script for `request` (None: every known fact). Run as `sh -s -- ARGS`."""
    wanted = {s.name for s in SPECS} if request is None else request.spec_names()
    unknown = wanted - set(BY_NAME)
    if unknown:
        raise ValueError(f"unknown facts: {', '.join(sorted(unknown))}")
    specs = [s for s in SPECS if s.name in wanted]
    return "\n".join([
        "# provision facts probe (POSIX sh): one round trip, one record per line.",
        "probe_main() {",
        "LC_ALL=C; export LC_ALL",
        "T=$(printf '\\t')",
        f"printf '{HEADER.replace(chr(9), chr(92) + 't')}\\n'",
        _fragment("lib"),
        *(_fragment(s.name) for s in specs),
        *(f'fact_{s.name} "$@"' for s in specs),
        "printf 'end\\n'",
        "}",
        'probe_main "$@"',
        "",
    ])


def parse(text: str) -> Facts:
    """Parse the probe's answer. Raises FactsError when it is truncated or malformed."""
    lines = text.split("\n")
    if not lines or lines[0] != HEADER:
        raise FactsError("not a provision probe answer (first line should be 'probe\\t1')")
    owner = {kind: s.name for s in SPECS for kind in s.kinds}
    records: dict[str, list[Rec]] = {s.name: [] for s in SPECS}
    ended = False
    for n, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        kind, _, rest = line.partition("\t")
        if kind == "end":
            ended = True
            break
        name = owner.get(kind)
        if name is not None:  # unknown kinds are ignored: a newer probe may say more
            records[name].append(Rec(n, kind, tuple(rest.split("\t")), rest))
    if not ended:
        raise FactsError("the probe's answer is truncated (no 'end' record)")
    values: dict[str, Any] = {s.name: s.parse(records[s.name]) for s in SPECS}
    return Facts(values)
