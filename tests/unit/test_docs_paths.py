"""The repository paths and `provision.*` modules the docs cite exist.

A file moves, the page that points at it stays: docs/*.md and README.md name test files,
fixture folders, templates and modules in backticks and links, and nothing but this test
notices when one of them is gone. Globs (`tests/unit/test_diff_*.py`), braces
(`tests/fixtures/steps/{run,task}/*.json`) and upper-case placeholders
(`templates/facts/NAME.sh`) must match at least one file; paths the repository ignores
(`bench/results/`, written by a run) are not looked for.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted(ROOT.glob("docs/*.md")), ROOT / "README.md"]
# the repository's own top-level folders: a path that starts with one is the repository's
TOPS = ("provision", "tests", "templates", "scripts", "bench", "docs", "examples",
        "playbooks", "inventories")
# not preceded by a path character: `/etc/provision/…` is a host's path, not ours
PATH = re.compile(r"(?<![\w./~$-])((?:" + "|".join(TOPS) + r")/[\w./*{},-]*[\w/*}])")
MODULE = re.compile(r"(?<![\w./-])(provision(?:\.\w+)+)")
# a test file by its bare name (`test_insiders.py`), with or without `::test_name`
TEST_FILE = re.compile(r"(?<![\w./-])((?:[\w-]+/)*test_\w+\.py)(?:::(\w+))?")
# the maps name modules by their path inside the package (`inventory/build.py`)
MAPS = ("docs/architecture.md", "docs/CONTRIBUTING.md")
RELATIVE = re.compile(r"(?<![\w./~$@-])((?:[\w-]+/)+[\w.-]*\w\.(?:py|sh|j2))\b")
CODE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(?=\.|$)")


def _ignored() -> tuple[str, ...]:
    """The anchored entries of .gitignore (`/bench/results/`): outputs, not sources."""
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return tuple(line.strip("/") for line in lines if line.startswith("/"))


def _braces(path: str) -> list[str]:
    """`a/{b,c}/d` -> [`a/b/d`, `a/c/d`] (one level is all the docs use)."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [x for alt in m.group(1).split(",")
            for x in _braces(path[:m.start()] + alt + path[m.end():])]


def _exists(path: str) -> bool:
    for one in _braces(path):
        pattern = one.strip("/")
        # an upper-case placeholder stands for any name: NAME.sh -> *.sh, HOST -> *
        loose = "/".join(PLACEHOLDER.sub("*", part) for part in pattern.split("/"))
        if not any(True for _ in ROOT.glob(pattern)) and not any(True for _ in ROOT.glob(loose)):
            return False
    return True


def cited_paths(text: str) -> list[tuple[int, str]]:
    """(line, path) for every repository path in a code span or a link target."""
    found = []
    for span in CODE.finditer(text):
        line = text.count("\n", 0, span.start()) + 1
        found += [(line, p) for p in PATH.findall(span.group(1))]
    return found


def cited_relative(text: str) -> list[tuple[int, str]]:
    """(line, path) for a file named by its path inside a top folder (`tasks/door.py`)."""
    found = []
    for span in CODE.finditer(text):
        line = text.count("\n", 0, span.start()) + 1
        found += [(line, p) for p in RELATIVE.findall(span.group(1))
                  if p.split("/")[0] not in TOPS]
    return found


def cited_tests(text: str) -> list[tuple[int, str, str]]:
    """(line, file, test) for every test file named in a code span, bare (`test_x.py`) or
    by path, and the test it names after `::` ('' when none)."""
    found = []
    for span in CODE.finditer(text):
        line = text.count("\n", 0, span.start()) + 1
        found += [(line, f, t) for f, t in TEST_FILE.findall(span.group(1))]
    return found


def defines_test(file: str, test: str) -> str | None:
    """None when `file` (a path from the root, or a bare name found once under tests/)
    exists and defines `test` (when given); else what is wrong."""
    if "/" in file:
        hits = [ROOT / file] if (ROOT / file).is_file() else []
    else:
        hits = sorted((ROOT / "tests").rglob(file))
    if len(hits) != 1:
        return f"{len(hits)} files called {file} under tests/" if hits else f"no {file}"
    if test and not re.search(rf"^\s*(?:async )?def {test}\(", hits[0].read_text(), re.M):
        return f"{hits[0].relative_to(ROOT)} defines no {test}"
    return None


def cited_links(text: str) -> list[tuple[int, str]]:
    """(line, target) for every relative link (no scheme, not only an anchor)."""
    out = []
    for m in LINK.finditer(text):
        target = m.group(1).split("#")[0]
        if target and ":" not in target:
            out.append((text.count("\n", 0, m.start()) + 1, target))
    return out


def cited_modules(text: str) -> list[tuple[int, str]]:
    found = []
    for span in CODE.finditer(text):
        line = text.count("\n", 0, span.start()) + 1
        found += [(line, d) for d in MODULE.findall(span.group(1))]
    return found


def _package_dirs() -> dict[str, str]:
    """Packages the wheel maps from another folder (`provision._templates` = templates/)."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    dirs: dict[str, str] = conf["tool"]["setuptools"].get("package-dir", {})
    return dirs


def resolves(dotted: str) -> str | None:
    """None when `dotted` is a module file (or a package) plus, optionally, names defined
    in it; else what is wrong."""
    mapped = _package_dirs()
    parts = dotted.split(".")
    for k in range(len(parts), 1, -1):
        name = ".".join(parts[:k])
        where = ROOT / mapped[name] if name in mapped else ROOT.joinpath(*parts[:k])
        if (name in mapped and where.is_dir()) or where.with_suffix(".py").is_file() \
                or (where / "__init__.py").is_file():
            break
    else:
        return "no such module file"
    obj: object = importlib.import_module(name) if name not in mapped else None
    for attr in parts[k:]:
        if obj is None or not hasattr(obj, attr):
            return f"{name} has no {'.'.join(parts[k:])}"
        obj = getattr(obj, attr)
    return None


def _cases() -> tuple[list[object], list[object], list[object]]:
    paths, links, modules, tests = [], [], [], []
    ignored = _ignored()
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        where = page.relative_to(ROOT)
        paths += [pytest.param(f"{where}:{n}", p, id=f"{where}:{n}:{p}")
                  for n, p in cited_paths(text)
                  if not any(p.strip("/").startswith(i) for i in ignored)]
        if str(where) in MAPS:
            # a module of provision/ (`tasks/door.py`), a template, a folder of tests/
            paths += [pytest.param(f"{where}:{n}", p, id=f"{where}:{n}:{p}")
                      for n, p in cited_relative(text)]
        links += [pytest.param(f"{where}:{n}", page.parent / t, id=f"{where}:{n}:{t}")
                  for n, t in cited_links(text)]
        modules += [pytest.param(f"{where}:{n}", d, id=f"{where}:{n}:{d}")
                    for n, d in cited_modules(text)]
        tests += [pytest.param(f"{where}:{n}", f, t, id=f"{where}:{n}:{f}::{t}")
                  for n, f, t in cited_tests(text)]
    return paths, links, modules, tests


PATHS, LINKS, MODULES, TESTS = _cases()


@pytest.mark.parametrize(("where", "path"), PATHS)
def test_every_repository_path_the_docs_cite_exists(where: str, path: str) -> None:
    # a path by its top folder, or one inside provision/, templates/ or tests/ (the maps)
    ok = _exists(path) if path.split("/")[0] in TOPS else any(
        _exists(f"{top}/{path}") for top in ("provision", "templates", "tests"))
    assert ok, f"{where}: `{path}` is not in the repository (moved? renamed?)"


@pytest.mark.parametrize(("where", "target"), LINKS)
def test_every_relative_link_the_docs_make_exists(where: str, target: Path) -> None:
    assert target.exists(), f"{where}: the link to {target} points at nothing"


@pytest.mark.parametrize(("where", "dotted"), MODULES)
def test_every_provision_module_the_docs_cite_resolves(where: str, dotted: str) -> None:
    why = resolves(dotted)
    assert why is None, f"{where}: `{dotted}`: {why}"


@pytest.mark.parametrize(("where", "file", "test"), TESTS)
def test_every_test_the_docs_cite_is_there(where: str, file: str, test: str) -> None:
    why = defines_test(file, test)
    assert why is None, f"{where}: `{file}{'::' + test if test else ''}`: {why}"


def test_the_scan_finds_what_it_must() -> None:
    """The extraction itself: a path in a command, a glob, braces, a placeholder, a
    host's path that is not ours, a dotted name with an attribute."""
    text = ("run `bash bench/floor.sh` and `tests/unit/test_d*.py`, `templates/facts/NAME.sh`,\n"
            "`tests/fixtures/steps/{run,task}/*.json`, not `/etc/provision/x.conf`;\n"
            "`provision.text.printable` [a](../scripts/demo.sh) [b](https://x/y) [c](#here)")
    assert [p for _, p in cited_paths(text)] == [
        "bench/floor.sh", "tests/unit/test_d*.py", "templates/facts/NAME.sh",
        "tests/fixtures/steps/{run,task}/*.json"]
    assert cited_links(text) == [(3, "../scripts/demo.sh")]
    assert cited_modules(text) == [(3, "provision.text.printable")]
    assert all(_exists(p) for _, p in cited_paths(text))
    assert not _exists("tests/unit/no_such_file.py")
    assert not _exists("tests/fixtures/steps/{run,no-such-folder}/*.json")
    assert not _exists("templates/no-such-folder/NAME.sh")
    assert resolves("provision.text.printable") is None
    assert resolves("provision._templates") is None
    assert resolves("provision.text.no_such_name") == "provision.text has no no_such_name"
    assert resolves("provision.no_such_module") == "no such module file"
    tests = "`test_docs_paths.py::test_the_scan_finds_what_it_must`, `tests/unit/test_docs_paths.py`"
    assert cited_tests(tests) == [(1, "test_docs_paths.py", "test_the_scan_finds_what_it_must"),
                                  (1, "tests/unit/test_docs_paths.py", "")]
    assert all(defines_test(f, t) is None for _, f, t in cited_tests(tests))
    assert defines_test("test_docs_paths.py", "no_such_test") == \
        "tests/unit/test_docs_paths.py defines no no_such_test"
    assert defines_test("test_no_such_file.py", "") == "no test_no_such_file.py"


def test_the_types_import_dns_writes_are_the_ones_the_page_lists() -> None:
    """docs/dns-records.md's `import dns` section lists the types written; the code's table
    (`provision/dns/adopt.py` FORMS) is what writes them."""
    from provision.dns.adopt import FORMS

    text = (ROOT / "docs" / "dns-records.md").read_text(encoding="utf-8")
    section = text[text.index("## Importing a zone"):]
    listed = re.search(r"- Written: the types provision manages \(([A-Z, ]+);", section)
    assert listed, "dns-records.md: the import section no longer lists the types it writes"
    assert [t.strip() for t in listed.group(1).split(",")] == list(FORMS)
