"""Write-back refuses an immutable inventory (chattr +i) before anything changes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from provision.inventory import load_inventory
from provision.inventory.writeback import WriteBackError, prepare
from tests.unit.test_inventory_writeback import FIXTURE


def test_an_immutable_file_is_refused_before_anything(tmp_path: Path) -> None:
    p = tmp_path / "inv.yml"
    shutil.copy(FIXTURE, p)
    inv = load_inventory(p)
    if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(p)]).returncode:
        pytest.skip("chattr +i is not available here (root is never refused by permissions)")
    try:
        with pytest.raises(WriteBackError, match="cannot be written"):
            prepare(inv, "lab.test", "app", "A", ("10.1.0.9",))
    finally:
        subprocess.run(["chattr", "-i", str(p)], check=True)
    assert p.read_text() == FIXTURE.read_text()
