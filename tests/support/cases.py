"""Fixture cases for the generic fact and step runners (tests/facts, tests/steps).

A case is one JSON file, `<folder>/<name>/<case>.json`, where `<name>` is a registered fact
or step. Loading is strict: an unknown key is an error, so a typo cannot turn an assertion
into a comment. `UPDATE_FIXTURES=1` rewrites the output keys of every case from what the
code produces now (review the diff before committing it); inputs are never rewritten.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

UPDATE = os.environ.get("UPDATE_FIXTURES") == "1"


def case_files(root: Path) -> list[Path]:
    return sorted(root.glob("*/*.json"))


def case_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def folders(root: Path) -> set[str]:
    """The fixture folders under `root` (each names a fact or a step)."""
    return {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}


def params(root: Path) -> list[Any]:
    return [pytest.param(p, id=case_id(p)) for p in case_files(root)]


def load(path: Path, allowed: Iterable[str]) -> dict[str, Any]:
    case = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(case, dict):
        raise AssertionError(f"{path}: a case is a JSON object")
    unknown = set(case) - {"doc", *allowed}
    if unknown:
        raise AssertionError(f"{path}: unknown keys {sorted(unknown)} (allowed: doc, "
                             f"{', '.join(allowed)})")
    return case


def update(path: Path, case: dict[str, Any], **outputs: Any) -> dict[str, Any]:
    """Write the case back with `outputs` replaced (UPDATE_FIXTURES=1); the new case."""
    case = {**case, **outputs}
    path.write_text(dumps(case) + "\n", encoding="utf-8")
    return case


def dumps(value: Any, indent: int = 0, width: int = 100) -> str:
    """JSON with one value per line, except that what fits on a line stays on one."""
    flat = json.dumps(value, ensure_ascii=False)
    if len(flat) + indent <= width or not isinstance(value, dict | list) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {dumps(v, indent + 2, width)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + dumps(v, indent + 2, width) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
