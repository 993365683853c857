"""provision lab with a bad lab name: exit 2. Here, not in tests/unit, because the command
imports provision.lab.netns, whose `ctypes.util.find_library("c")` starts ldconfig."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from provision.cli import main


def test_a_bad_lab_name_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setenv("PROVISION_LAB_NAME", "Bad Name")
    r = CliRunner().invoke(main, ["lab", "status"])
    assert r.exit_code == 2
    assert "PROVISION_LAB_NAME" in r.output and "invalid lab name" in r.output
