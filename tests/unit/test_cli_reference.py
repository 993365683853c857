"""docs/cli.md is what scripts/cli_reference.py makes of the click commands today."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "scripts" / "cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_current() -> None:
    fresh = _script().render()
    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == fresh, (
        "docs/cli.md is stale (a command, option or help text changed): run `make docs-cli` "
        "and commit docs/cli.md")


def test_every_command_and_option_is_in_the_reference() -> None:
    from provision.cli import COMMANDS

    text = _script().render()
    for name in COMMANDS:
        assert f"## `provision {name}`" in text
    # Nested groups and their options are walked too.
    assert "#### `provision dns migrate run`" in text
    assert "`--lower-ttl SECONDS`" in text
    assert "`--shard K/N`" in text


def test_check_mode_fails_on_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    out = tmp_path / "cli.md"
    out.write_text(script.render().replace("--lower-ttl", "--lower"), encoding="utf-8")
    assert script.main(["--check", "--out", str(out)]) == 1
    assert "run `make docs-cli`" in capsys.readouterr().err
    assert script.main(["--out", str(out)]) == 0
    assert script.main(["--check", "--out", str(out)]) == 0
