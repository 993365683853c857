"""`provision lab` usage errors that need no root: they must exit 2 with a clear message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


TEAM = Path(__file__).parent.parent / "fixtures" / "adopt" / "team.yml"


@pytest.mark.parametrize(("make", "error"), [
    (lambda d: (d / "six-1.17.0-py2.py3-none-any.whl").symlink_to("/etc/passwd"),
     "six-1.17.0-py2.py3-none-any.whl: a symlink"),
    (lambda d: (d / "notes.txt").write_text("x"), "notes.txt: not a wheel's file name"),
    (lambda d: (d / "six-1.17.0-py3-none-any.whl").write_bytes(b"no zip"), "not a zip archive"),
])
def test_adopt_with_a_bad_wheels_dir_exits_2_before_any_lab(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, make: Any, error: str) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)

    def no_lab(*_: object) -> None:
        raise AssertionError("a lab was looked for")

    monkeypatch.setattr("provision.commands.lab_adopt._lab_for", no_lab)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make(wheels)
    r = CliRunner().invoke(main, ["lab", "adopt", str(TEAM), "--wheels", str(wheels)])
    assert r.exit_code == 2, r.output
    assert f"--wheels: {wheels}/" in r.output and error in r.output, r.output
