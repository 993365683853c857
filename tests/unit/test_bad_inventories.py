"""Every rejected inventory: exit 2, file:line, the field path, no traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from provision.cli import main

BAD = sorted((Path(__file__).parent.parent / "fixtures" / "bad").glob("*.yml"))


def _expectations(path: Path) -> list[tuple[int | None, str | None]]:
    """The `# expect: LINE FIELD` lines of a case: the first line is one; a case with
    several problems lists each (all must be reported in the one run)."""
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# expect: "), f"{path.name} lacks an '# expect: LINE FIELD' header"
    out = []
    for ln in lines:
        m = re.match(r"# expect: (\S+) (\S+)", ln)
        if m:
            line, field = m.groups()
            out.append(((None if line == "-" else int(line)), (None if field == "-" else field)))
    assert out, f"{path.name}: '# expect: LINE FIELD' (LINE or FIELD may be '-')"
    return out


def test_corpus_is_large_enough() -> None:
    assert len(BAD) >= 25


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_inventory_is_rejected_with_location(path: Path) -> None:
    result = CliRunner().invoke(main, ["check", "-i", str(path)])
    out = result.output
    assert result.exit_code == 2, out
    assert "Traceback" not in out
    assert result.exception is None or isinstance(result.exception, SystemExit)
    for line, field in _expectations(path):
        if line is not None and field is not None:  # that field, at that line
            assert re.search(rf"{re.escape(str(path))}:{line}:\d+: {re.escape(field)}", out), out
        elif line is not None:
            assert re.search(rf"{re.escape(str(path))}:{line}:\d+: ", out), out
        else:
            assert re.search(rf"{re.escape(str(path))}:\d+:\d+: ", out), out
        if field is not None:
            assert f": {field}" in out, out
    for text in _header(path, "never"):  # a misleading message (a union's wrong branch, ...)
        assert text not in out, out
    for text in _header(path, "says"):  # what the message must name ({file}: this file)
        assert text.replace("{file}", str(path)) in out, out


def _header(path: Path, word: str) -> list[str]:
    """The `# never: TEXT` (what the error must not say) or `# says: TEXT` (what it must
    say) lines of a case."""
    return [ln.removeprefix(f"# {word}: ") for ln in path.read_text().splitlines()
            if ln.startswith(f"# {word}: ")]


def test_missing_inventory_path_is_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["check", "-i", str(tmp_path / "nope.yml")])
    assert result.exit_code == 2
    assert "no such file" in result.output


def test_directory_conflict_names_both_files(tmp_path: Path) -> None:
    (tmp_path / "a.yml").write_text("version: 1\ndefaults: {user: ubuntu}\n")
    (tmp_path / "b.yml").write_text("version: 1\ndefaults: {user: admin}\n")
    result = CliRunner().invoke(main, ["check", "-i", str(tmp_path)])
    assert result.exit_code == 2
    assert "b.yml:2:" in result.output and "a.yml:2" in result.output
    assert "defaults.user" in result.output
