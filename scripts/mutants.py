#!/usr/bin/env python3
"""`make mutants`: mutation testing of the safety-critical modules with mutmut 3.

mutmut 3 mutates a copy of the tree (`mutants/` under the directory it runs in) and runs
pytest there. So that it never writes into the work tree, and so that each module is
tested only by its own fast pure unit tests (never the lab), every module gets a scratch
copy of the tree (the files git knows, plus new untracked ones) with a `[tool.mutmut]`
section naming that one module and its test files; mutmut runs there, one module at a
time, at the lowest CPU priority. A per-module report (each survivor's diff) is written
to build/mutants/<module>.txt and a summary table is printed.

Survivors that cannot be killed (equivalent mutants) are listed with the reason in
scripts/mutants_equivalent.txt, keyed by the function and the mutated line, not by
mutmut's number (which moves when the code above it changes).

    python scripts/mutants.py                 # every module
    python scripts/mutants.py sinks internet  # modules whose path contains a word
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "build" / "mutants"
EQUIVALENT = Path(__file__).with_name("mutants_equivalent.txt")
MODULE_TIMEOUT = 1800  # seconds for one module's whole mutmut run

# module -> the tests that judge it (fast, no lab, no network: the pure unit tests, and the
# tests/integration files split out of them, which run sh or a loopback fake)
MODULES: dict[str, list[str]] = {
    "provision/render/sinks.py": ["tests/unit/test_render.py", "tests/unit/test_guards_sinks.py"],
    "provision/exposure/internet.py": ["tests/unit/test_internet.py",
                                       "tests/unit/test_guards_internet.py"],
    "provision/ssh/hostkeys.py": ["tests/unit/test_host_keys.py",
                                  "tests/unit/test_guards_hostkeys.py"],
    "provision/steps/commit.py": ["tests/unit/test_harden_commit.py",
                                  "tests/unit/test_guards_commit.py",
                                  "tests/integration/test_commit_scripts_sh.py",
                                  "tests/integration/test_guards_commit_sh.py"],
    "provision/hosts/confirm.py": ["tests/unit/test_guards_confirm.py"],
    "provision/dns/zone_plan.py": ["tests/unit/test_dns_records.py", "tests/unit/test_guards_dns.py",
                            "tests/integration/test_guards_dns_fake.py"],
    "provision/dns/markers.py": ["tests/unit/test_dns_records.py", "tests/unit/test_guards_dns.py",
                            "tests/integration/test_guards_dns_fake.py"],
    "provision/dns/rrset.py": ["tests/unit/test_dns_records.py", "tests/unit/test_guards_dns.py",
                            "tests/integration/test_guards_dns_fake.py"],
    "provision/dns/migrate/phases.py": ["tests/unit/test_dns_migrate_phases.py",
                                        "tests/unit/test_guards_migrate.py",
                                        "tests/integration/test_dns_migrate_health.py",
                                        "tests/integration/test_guards_migrate_fake.py"],
    "provision/cloud/rules.py": ["tests/unit/test_sg_rules.py", "tests/unit/test_guards_sg.py"],
    "provision/inventory/fields.py": ["tests/unit/test_inventory.py",
                                      "tests/unit/test_hostile_inventory.py",
                                      "tests/integration/test_hostile_inventory_limits.py",
                                      "tests/unit/test_guards_fields.py"],
}
ALSO_COPY = ["templates", "playbooks", "inventories"]


@dataclass
class Score:
    module: str
    killed: int = 0
    survived: int = 0
    explained: int = 0
    no_tests: int = 0
    timeout: int = 0
    other: int = 0
    total: int = 0
    error: str = ""

    @property
    def unexplained(self) -> int:
        return self.survived - self.explained


def tree_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if (ROOT / p).is_file()]


def scratch_copy(module: str, tests: list[str]) -> Path:
    d = Path(tempfile.mkdtemp(prefix="provision-mutants-"))
    for rel in tree_files():
        dst = d / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dst)
    conf = (
        "\n[tool.mutmut]\n"
        'source_paths = ["provision"]\n'
        f"only_mutate = {json.dumps([module])}\n"
        f"also_copy = {json.dumps(ALSO_COPY)}\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-x", "-q"]\n'
    )
    with open(d / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write(conf)
    return d


def mutmut(work: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("mutmut")
    return subprocess.run([str(exe), *args], cwd=work, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def equivalents() -> dict[str, str]:
    """`function | mutated line | reason` lines -> {key: reason}."""
    out: dict[str, str] = {}
    if not EQUIVALENT.exists():
        return out
    for line in EQUIVALENT.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        func, mutated, reason = (p.strip() for p in line.split(" | ", 2))
        out[f"{func} | {mutated}"] = reason
    return out


def mutant_key(name: str, diff: str) -> str:
    """`module.function | the + lines of the diff`, stable across renumbering."""
    # mutmut names a function's mutants `mod.x_func__mutmut_N`, a method's
    # `mod.xǁClassǁmethod__mutmut_N`
    m = re.match(r"^(.*)\.x(?:_|ǁ)(.+)__mutmut_\d+$", name)
    func = f"{m.group(1)}.{m.group(2).replace('ǁ', '.')}" if m else name
    plus = [ln[1:].strip() for ln in diff.splitlines()
            if ln.startswith("+") and not ln.startswith("+++")]
    return f"{func} | {' / '.join(plus) or '(line removed)'}"


def run_module(module: str, tests: list[str]) -> Score:
    score = Score(module)
    missing = [t for t in tests if not (ROOT / t).exists()]
    if missing:
        score.error = f"missing test files: {', '.join(missing)}"
        return score
    work = scratch_copy(module, tests)
    report = REPORTS / (module.replace("/", ".").removesuffix(".py") + ".txt")
    try:
        r = mutmut(work, "run", timeout=MODULE_TIMEOUT)
        if r.returncode != 0:
            score.error = f"mutmut run exited {r.returncode}: {r.stderr.strip()[-800:]}"
            return score
        mutmut(work, "export-cicd-stats")
        stats = json.loads((work / "mutants" / "mutmut-cicd-stats.json").read_text())
        score.killed, score.survived = stats["killed"], stats["survived"]
        score.no_tests, score.timeout = stats["no_tests"], stats["timeout"]
        score.total = stats["total"]
        score.other = score.total - score.killed - score.survived - score.no_tests - score.timeout
        lines = mutmut(work, "results").stdout.splitlines()
        known = equivalents()  # read after the (long) run: explanations added meanwhile count
        survivors = [ln.split(":")[0].strip() for ln in lines
                     if ln.strip().endswith((": survived", ": no tests"))]
        body: list[str] = []
        for name in survivors:
            diff = mutmut(work, "show", name).stdout
            key = mutant_key(name, diff)
            reason = known.get(key)
            untested = any(ln.strip().startswith(name + ":") and ln.strip().endswith("no tests")
                           for ln in lines)
            if untested:
                reason = None  # no test ran it: never explained away
            elif reason is not None:
                score.explained += 1
            label = "NO TEST RUNS IT" if untested else (
                "equivalent: " + reason if reason else "UNEXPLAINED")
            body.append(f"== {name}  [{label}]\n"
                        f"key: {key}\n{diff}\n")
        REPORTS.mkdir(parents=True, exist_ok=True)
        report.write_text(f"{module}: {score.killed}/{score.total} killed, {score.survived} "
                          f"survived ({score.explained} explained as equivalent)\n\n"
                          + "\n".join(body), encoding="utf-8")
    except subprocess.TimeoutExpired:
        score.error = f"mutmut took longer than {MODULE_TIMEOUT} s"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return score


def main(argv: list[str]) -> int:
    os.nice(19)  # CPU-heavy: never in the way of anything else on the machine
    words = argv[1:]
    chosen = {m: t for m, t in MODULES.items() if not words or any(w in m for w in words)}
    if not chosen:
        print(f"no module matches {' '.join(words)}; modules: {', '.join(MODULES)}", file=sys.stderr)
        return 2
    scores = []
    for module, tests in chosen.items():
        t0 = time.monotonic()
        print(f"{module}: mutating, judged by {', '.join(tests)}", flush=True)
        s = run_module(module, tests)
        took = time.monotonic() - t0
        print(f"  {s.error or f'{s.killed}/{s.total} killed, {s.survived} survived ({s.explained} equivalent), {s.no_tests} without tests, {s.timeout} timeouts'} [{took:.0f} s]",
              flush=True)
        scores.append(s)
    print()
    print(f"{'module':40} {'killed':>7} {'total':>6} {'survived':>9} {'equiv.':>7} {'no test':>8}")
    for s in scores:
        if s.error:
            print(f"{s.module:40} ERROR {s.error}")
            continue
        print(f"{s.module:40} {s.killed:>7} {s.total:>6} {s.survived:>9} {s.explained:>7} {s.no_tests:>8}")
    print(f"\nreports: {REPORTS.relative_to(ROOT)}/")
    # a timeout is a detected mutant (the tests did not pass), not a survivor
    bad = [s for s in scores if s.error or s.unexplained or s.no_tests]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
