"""The import graph of `provision/` points down and has no circle (docs/architecture.md#floors).

Every import counts: at the top of a module, under `TYPE_CHECKING`, inside a function.
A type hint that goes up is still a module that cannot be understood without the one
above it, and an import inside a function hides a cycle as well as it saves start-up time.

The floors are declared once, in the table of docs/architecture.md's "Floors" section,
and read from there: the doc and this test cannot disagree. A module of a package the
table does not name fails too, so a new package gets a floor when it is made.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "architecture.md"
FIXTURE = ROOT / "tests" / "fixtures" / "import_layers"

# Cycles still there on purpose, each with why and what ends it. A fixed one must leave
# this list (the test fails on a listed cycle that is gone), a new one fails the test.
# A circle allowed for a while, with the reason; none is left (the converge engine in hosts/
# broke the last one, commands.converge <-> commands.converge_run).
KNOWN_CYCLES: dict[frozenset[str], str] = {}


@dataclass(frozen=True)
class Arrow:
    source: str     # importing module, dotted
    target: str     # imported module, dotted
    path: str       # importing file, relative to the tree's parent
    line: int

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def modules(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under `package_dir` (a package)."""
    out: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: Mapping[str, Path]) -> str | None:
    """The module `name` loads: itself, or its longest prefix that is a module."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def arrows(package_dir: Path) -> list[Arrow]:
    """Every import from a module of the package to another of its modules."""
    known = modules(package_dir)
    top = package_dir.name
    out: list[Arrow] = []
    for name, path in known.items():
        is_pkg = path.name == "__init__.py"
        here = name.split(".") if is_pkg else name.split(".")[:-1]  # the package it is in
        rel = str(path.relative_to(package_dir.parent))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[:len(here) - (node.level - 1)]
                    mod = ".".join([*base, node.module] if node.module else base)
                else:
                    mod = node.module or ""
                # `from M import n` loads M.n when that is a module, else takes n from M
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod
                           for a in node.names]
            for t in targets:
                if t != top and not t.startswith(top + "."):
                    continue
                target = _resolve(t, known)
                if target is not None and target != name:
                    out.append(Arrow(name, target, rel, node.lineno))
    return sorted(set(out), key=lambda a: (a.path, a.line, a.target))


def components(edges: Iterable[Arrow]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    succ: dict[str, set[str]] = {}
    for a in edges:
        succ.setdefault(a.source, set()).add(a.target)
        succ.setdefault(a.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(succ):
        if start in index:
            continue
        work = [(start, iter(sorted(succ[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(frozenset(comp))
    return found


def unit(module: str) -> str:
    """The package (or top-level module) a module belongs to: `provision.dns.migrate.run`
    -> `dns`, `provision.errors` -> `errors`, `provision` -> `provision`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floors_from_doc(text: str) -> dict[str, tuple[int, str]]:
    """The floor table of docs/architecture.md's "Floors" section: package -> (floor,
    its name). Rows are `| N name | `pkg/`, `module.py`, ... |`."""
    section = text.split("\n## Floors\n", 1)[1].split("\n## ", 1)[0]
    out: dict[str, tuple[int, str]] = {}
    for line in section.splitlines():
        m = re.match(r"\|\s*(\d+)\s+([^|]*?)\s*\|(.*)\|\s*$", line)
        if not m:
            continue
        for name in re.findall(r"`([^`]+)`", m.group(3)):
            key = name.removesuffix("/").removesuffix(".py").removesuffix("/__init__")
            assert key not in out, f"{key} has two floors in the table"
            out[key] = (int(m.group(1)), m.group(2))
    return out


def problems(package_dir: Path, floors: Mapping[str, tuple[int, str]],
             known_cycles: Mapping[frozenset[str], str]) -> list[str]:
    """What breaks the layering, one line each naming file:line and the arrow."""
    edges = arrows(package_dir)
    out: list[str] = []
    for comp in components(edges):
        if comp in known_cycles:
            continue
        inside = [a for a in edges if a.source in comp and a.target in comp]
        out.append(f"import cycle of {len(comp)} modules: " + "; ".join(
            f"{a.where()}: {a.source} -> {a.target}" for a in inside))
    for a in edges:
        src, dst = unit(a.source), unit(a.target)
        if src == dst:
            continue
        for u, m in ((src, a.source), (dst, a.target)):
            if u not in floors:
                out.append(f"{a.where()}: {m} is in `{u}`, which has no floor in the table "
                           f"of {DOC.relative_to(ROOT)}#floors")
        if src in floors and dst in floors and floors[src][0] < floors[dst][0]:
            (fs, ns), (fd, nd) = floors[src], floors[dst]
            out.append(f"{a.where()}: back arrow {a.source} -> {a.target}: `{src}` "
                       f"(floor {fs}, {ns}) imports `{dst}` (floor {fd}, {nd})")
    return sorted(set(out))


def test_provision_imports_point_down_without_a_cycle() -> None:
    found = problems(ROOT / "provision", floors_from_doc(DOC.read_text(encoding="utf-8")),
                     KNOWN_CYCLES)
    assert not found, "\n".join(found)


def test_every_package_has_a_floor_and_every_floor_a_package() -> None:
    floors = floors_from_doc(DOC.read_text(encoding="utf-8"))
    units = {unit(m) for m in modules(ROOT / "provision")}
    assert units == set(floors), (f"no floor: {sorted(units - set(floors))}; "
                                  f"no such package: {sorted(set(floors) - units)}")


FIXTURE_FLOORS = {"base": (0, "base"), "low": (1, "low"), "high": (2, "high"),
                  "layered": (0, "the root")}


def test_the_checker_flags_a_cycle_and_back_arrows_in_every_form() -> None:
    found = problems(FIXTURE / "layered", FIXTURE_FLOORS, {})
    assert found == [
        "import cycle of 2 modules: layered/high/b.py:3: layered.high.b -> layered.high.c; "
        "layered/high/c.py:6: layered.high.c -> layered.high.b",
        "layered/low/a.py:10: back arrow layered.low.a -> layered.high.b: `low` (floor 1, "
        "low) imports `high` (floor 2, high)",
        "layered/low/a.py:5: back arrow layered.low.a -> layered.high.c: `low` (floor 1, "
        "low) imports `high` (floor 2, high)",
        "layered/low/a.py:8: back arrow layered.low.a -> layered.high: `low` (floor 1, "
        "low) imports `high` (floor 2, high)",
        "layered/low/d.py:3: back arrow layered.low.d -> layered.high.b: `low` (floor 1, "
        "low) imports `high` (floor 2, high)",
        "layered/low/d.py:4: layered.stray is in `stray`, which has no floor in the table "
        "of docs/architecture.md#floors",
    ]


def test_the_checker_passes_a_tree_that_points_down() -> None:
    # the same fixture, with floors that put high below low and the stray module on
    # the floor of the root: only the cycle is left, and it is known
    floors = {**FIXTURE_FLOORS, "high": (0, "base"), "stray": (0, "base")}
    cycle = frozenset({"layered.high.b", "layered.high.c"})
    assert problems(FIXTURE / "layered", floors, {cycle: "a test"}) == []


def test_the_floor_table_is_read_from_the_doc() -> None:
    floors = floors_from_doc(DOC.read_text(encoding="utf-8"))
    assert floors["errors"][0] < floors["inventory"][0] < floors["commands"][0]
    assert floors["dnsdata"][0] < floors["inventory"][0] < floors["dns"][0]
