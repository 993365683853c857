"""The lab's work units under `make test` (tests/conftest.py): every file they name exists,
and a lab file that brings up a lab of its own is a unit of its own (in a group it would
run after that group's tests instead of beside them)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import LAB, LAB_ORDER, LAB_OWN, LAB_SECOND, LAB_THIRD, lab_unit

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / LAB).glob("test_*.py"))


def _requests_the_session_lab(text: str) -> bool:
    """A test or fixture of the file takes the argument `lab` (the session's lab), and the
    file does not define a `lab` fixture of its own (which its tests then get instead)."""
    tree = ast.parse(text)
    if any(isinstance(fn, ast.FunctionDef) and fn.name == "lab"
           and any("fixture" in ast.unparse(d) for d in fn.decorator_list)
           for fn in ast.walk(tree)):
        return False
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        fixture = any("fixture" in ast.unparse(d) for d in fn.decorator_list)
        if (fn.name.startswith("test_") or fixture) and "lab" in [a.arg for a in fn.args.args]:
            return True
    return False


def test_every_named_lab_file_exists() -> None:
    named = set(LAB_OWN) | LAB_SECOND | LAB_THIRD
    assert not named - set(FILES), named - set(FILES)
    assert not set(LAB_OWN) & LAB_SECOND and not set(LAB_OWN) & LAB_THIRD
    assert not LAB_SECOND & LAB_THIRD


def test_a_file_with_a_lab_of_its_own_is_a_unit_of_its_own() -> None:
    texts = {f: (ROOT / f).read_text() for f in FILES}
    own = [f for f, text in texts.items()
           if 'provision("up"' in text and not _requests_the_session_lab(text)]
    assert sorted(own) == sorted(LAB_OWN)


def test_units() -> None:
    assert lab_unit("tests/unit/test_x.py::test_y") is None
    assert lab_unit(f"{LAB}test_lynis.py::test_a") == f"{LAB}test_lynis.py"
    assert lab_unit(f"{LAB}test_dns.py::test_a[x]") == f"{LAB}#2"
    assert lab_unit(f"{LAB}test_converge.py::test_a") == f"{LAB}#1"
    assert lab_unit(f"{LAB}test_dns_migrate.py::test_a") == f"{LAB}#3"
    assert {lab_unit(f"{f}::t") for f in FILES} == set(LAB_ORDER)
