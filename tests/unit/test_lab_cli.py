"""`provision lab` usage errors that need no root: they must exit 2 with a clear message."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from provision.cli import main


@pytest.mark.parametrize("args", [["up"], ["down"], ["status"], ["exec", "--", "true"]])
def test_without_root_every_lab_command_exits_2(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    r = CliRunner().invoke(main, ["lab", *args])
    assert r.exit_code == 2
    assert "needs root" in r.output


def test_the_lab_group_is_registered() -> None:
    r = CliRunner().invoke(main, ["lab", "--help"])
    assert r.exit_code == 0
    for cmd in ("up", "down", "status", "exec"):
        assert cmd in r.output
