"""Parser limits of the inventory, checked by provision as a real process: deep nesting, huge
files and lines, alias and anchor floods are refused quickly, with file:line, exit 2, no
traceback."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest


def _big_list(size: int) -> str:
    head = "version: 1\nhosts:\n  gpu1:\n    address: 10.0.0.1\n    ssh_from: [10.0.0.0/8]\n    packages:\n"
    item = "      - tmux\n"
    return head + item * ((size - len(head)) // len(item))


LIMITS: dict[str, Callable[[], str]] = {
    "nested_flow_sequences_5000": lambda: "version: 1\nx: " + "[" * 5000 + "]" * 5000 + "\n",
    "nested_flow_mappings_5000": lambda: "version: 1\nx: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n",
    "nested_block_mappings_300": lambda: "version: 1\n" + "".join(
        " " * i + f"k{i}:\n" for i in range(300)) + " " * 300 + "v\n",
    "file_5mb": lambda: _big_list(5 * 1024 * 1024),
    "file_20mb": lambda: _big_list(20 * 1024 * 1024),
    "long_line_5mb": lambda: "version: 1\nhosts:\n  gpu1: {address: '" + "a" * (5 * 1024 * 1024) + "'}\n",
    "many_aliases": lambda: "version: 1\nx: &a [1, 2, 3, 4, 5, 6, 7, 8]\ny: [" + ", ".join(
        ["*a"] * 100_000) + "]\n",
    "many_anchors": lambda: "version: 1\nx: [" + ", ".join(
        f"&a{i} {i}" for i in range(200_000)) + "]\n",
}


@pytest.mark.parametrize("make", list(LIMITS.values()), ids=list(LIMITS))
def test_parser_limits(make: Callable[[], str], tmp_path: Path) -> None:
    path = tmp_path / "inventory.yml"
    path.write_text(make())
    start = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-m", "provision", "check", "-i", str(path)],
                           capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer within 60 s for a {path.stat().st_size} byte file")
    elapsed = time.monotonic() - start
    out = p.stdout + p.stderr
    last = (out.strip().splitlines() or [""])[-1]
    assert "Traceback" not in out, f"traceback, exit {p.returncode} after {elapsed:.1f}s: {last[:300]}"
    assert p.returncode == 2, f"exit {p.returncode} after {elapsed:.1f}s: {out[-600:]}"
    assert re.search(rf"^{re.escape(str(path))}:\d+:\d+: ", p.stderr, re.M), p.stderr[-600:]
    assert len(p.stderr) < 20_000, f"{len(p.stderr)} bytes of errors: {p.stderr[:200]!r}..."
