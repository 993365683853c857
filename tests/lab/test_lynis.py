"""A hardening score someone else measures: lynis (Debian's, `lynis audit system --quick`)
on a lab GPU host after `apply --playbook bootstrap-gpu-server` of the lab's own inventory.

Its own lab (default image), so no other module's leftovers count for or against it. The
index must stay at or above GOAL, and every warning and suggestion lynis still makes must be
listed, with its reason, in docs/hardening.md's lynis table: a new one fails until someone
explains it or fixes it. The figures are printed: run with `-s` to see them.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from provision.lab import plan as P

from .conftest import Lab, _keys_usable_from_copies, _load, provision, require_lab_prerequisites

pytestmark = pytest.mark.lab

GOAL = 75
HOST = "gpu1"
DOC = Path(__file__).parents[2] / "docs" / "hardening.md"
REPORT = "/var/log/lynis-report.dat"


@pytest.fixture(scope="module")
def bootstrapped() -> Iterator[Lab]:
    require_lab_prerequisites()
    if not shutil.which("lynis"):
        pytest.fail("lynis not found (apt: see Makefile LAB_DEBS)")
    name = f"pytest-lynis-{secrets.token_hex(3)}"
    try:
        provision("up", name=name)
        lab = _load(name)
        with _keys_usable_from_copies(lab):
            code, data, err = lab.provision_json(
                "apply", "--yes", "--playbook", "bootstrap-gpu-server", "-i", str(lab.inventory),
                timeout=600)
            assert code == 0, (err, json.dumps(data)[:3000])
            yield lab
    finally:
        provision("down", name=name, check=False)
        shutil.rmtree(f"{P.DATA_ROOT}/{name}", ignore_errors=True)


def report(lab: Lab) -> dict[str, list[str]]:
    """lynis's report, key -> values (`key[]=` lines collect)."""
    lab.host(HOST, "lynis", "audit", "system", "--quick", "--no-colors", timeout=900)
    out: dict[str, list[str]] = {}
    for line in lab.host(HOST, "cat", REPORT).stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out.setdefault(key.removesuffix("[]"), []).append(value)
    return out


def points_lost(lab: Lab) -> tuple[int, int, dict[str, int]]:
    """From lynis's log: the points it gave, the most it could have, and per test what it
    held back (the figures behind the index)."""
    test, got, most = "", 0, 0
    lost: dict[str, int] = {}
    for line in lab.host(HOST, "cat", "/var/log/lynis.log").stdout.splitlines():
        if m := re.search(r"Performing test ID (\S+)", line):
            test = m.group(1)
        elif "Hardening: assigned" in line:
            part = re.search(r"\((\d+) of (\d+)\)", line)
            full = re.search(r"for this item \((\d+)\)", line)
            a, b = (int(part[1]), int(part[2])) if part else (int(full[1]), int(full[1])) if full else (0, 0)
            got, most = got + a, most + b
            if a < b:
                lost[test] = lost.get(test, 0) + b - a
    return got, most, dict(sorted(lost.items(), key=lambda kv: -kv[1]))


def documented() -> set[str]:
    """The test IDs docs/hardening.md's lynis table explains (its first column's `ID`s)."""
    text = DOC.read_text()
    start = text.index("## What lynis still says")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end > 0 else None]
    firsts = [row.split("|")[1] for row in section.splitlines() if row.startswith("| `")]
    return {i for cell in firsts for i in re.findall(r"`([A-Z]+(?:-[0-9]+)?)`", cell)}


def test_a_bootstrapped_gpu_host_scores_at_least_the_goal_and_every_remark_is_explained(
        bootstrapped: Lab) -> None:
    rep = report(bootstrapped)
    index = int(rep["hardening_index"][0])
    remarks = {kind: sorted({v.split("|")[0] for v in rep.get(kind, [])})
               for kind in ("warning", "suggestion")}
    got, most, lost = points_lost(bootstrapped)
    print(f"\nlynis on a bootstrapped {HOST}: hardening index {index} ({got} of {most} points), "
          f"{len(rep.get('warning', []))} warnings, {len(rep.get('suggestion', []))} suggestions\n"
          f"{json.dumps(remarks, indent=1)}\npoints held back: {json.dumps(lost)}")
    assert index >= GOAL, f"lynis hardening index {index} < {GOAL}: {remarks}"
    unexplained = sorted((set(remarks["warning"]) | set(remarks["suggestion"])) - documented())
    assert not unexplained, (f"lynis remarks not listed in {DOC.name}'s lynis table "
                             f"(fix them or say why they stay): {unexplained}")
