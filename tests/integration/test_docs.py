"""The manual builds: `mkdocs build --strict` (as `make docs` runs it) passes, and every link
from the README into docs/ lands on a page and an anchor that exist.

Strict mode with mkdocs.yml's `validation` turns a broken link, a missing anchor and a page
left out of the nav into failures; the last test shows that it does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
# [text](docs/page.md) or [text](docs/page.md#anchor) or [text](docs/) in the README.
README_LINK = re.compile(r"\]\((docs/[^)#\s]*)(?:#([^)\s]+))?\)")


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict",
         "--config-file", str(config), "--site-dir", str(site)],
        cwd=config.parent, capture_output=True, text=True, timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = _build(ROOT / "mkdocs.yml", out)
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stdout}{built.stderr}"
    return out


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids.update(v for k, v in attrs if k == "id" and v)


def _page(site: Path, target: str) -> Path:
    """The built HTML of a docs/ link (mkdocs' directory URLs: docs/x.md -> x/index.html)."""
    rel = target.removeprefix("docs/")
    if rel in ("", "index.md"):
        return site / "index.html"
    assert rel.endswith(".md"), f"README links into docs/ at {target!r}, not a page"
    return site / rel.removesuffix(".md") / "index.html"


def test_site_builds_with_every_page(site: Path) -> None:
    for md in (ROOT / "docs").glob("*.md"):
        assert _page(site, f"docs/{md.name}").is_file(), f"{md.name} was not built"


def test_readme_links_into_docs_resolve(site: Path) -> None:
    links = README_LINK.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(links) >= 10, "the README is the front door: it links into the manual"
    for target, anchor in links:
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"
        if anchor:
            parser = _Ids()
            parser.feed(_page(site, target).read_text(encoding="utf-8"))
            assert anchor in parser.ids, f"README links to {target}#{anchor}: no such anchor"


def test_readme_keeps_the_two_setup_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text
    assert len(text.splitlines()) < 250, "the README is the front door: keep it under 250 lines"


def test_strict_build_fails_on_a_broken_link_and_a_page_left_out(tmp_path: Path) -> None:
    # The project's own settings (theme, extensions, validation) over a two-page manual.
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    config["nav"] = [{"Home": "index.md"}, {"Guide": "guide.md"}]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the guide](guide.md#usage).\n", encoding="utf-8")
    (docs / "guide.md").write_text(
        "# Guide\n\nSee [nowhere](no-such-page.md) and [a heading](index.md#no-such-heading).\n",
        encoding="utf-8")
    (docs / "stray.md").write_text("# A page nobody put in the nav\n", encoding="utf-8")
    built = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    output = built.stdout + built.stderr
    assert built.returncode != 0
    assert "no-such-page.md" in output
    assert "no-such-heading" in output
    assert "#usage" in output  # the index links to a heading guide.md lacks
    assert "stray.md" in output


LIST_ITEM = re.compile(r"^([-*+]|\d+\.)\s")


def _glued_blocks(text: str) -> list[int]:
    """Lines where a list or table starts right under a paragraph line: GitHub renders that,
    Python-Markdown (mkdocs) folds the list or the table into the paragraph."""
    lines, fence, found = text.split("\n"), False, []
    for i, line in enumerate(lines[1:], start=1):
        prev = lines[i - 1]
        if line.lstrip().startswith("```"):
            fence = not fence
        if fence or not prev.strip() or prev.startswith(("#", " ", "```")):
            continue
        starts_list = bool(LIST_ITEM.match(line)) and not LIST_ITEM.match(prev)
        starts_table = line.startswith("|") and not prev.startswith("|")
        if starts_list or starts_table:
            found.append(i + 1)
    return found


def test_lists_and_tables_are_blocks_of_their_own() -> None:
    assert _glued_blocks("Text:\n- item\n") == [2]
    assert _glued_blocks("Text:\n| a |\n|---|\n") == [2]
    assert _glued_blocks("Text:\n\n- item\n- item\n  more\n- item\n") == []
    for page in sorted((ROOT / "docs").glob("*.md")):
        glued = _glued_blocks(page.read_text(encoding="utf-8"))
        assert not glued, f"docs/{page.name}:{glued[0]}: put a blank line before the list or table"


CITATION = re.compile(r"docs/([\w-]+\.md)(?:#([\w-]+))?")


def test_citations_of_the_manual_in_the_code_resolve(site: Path) -> None:
    this = Path(__file__).resolve()
    cited = 0
    for folder in ("provision", "tests", "bench", "scripts", "templates"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".sh", ".j2") or path.resolve() == this:
                continue
            for page, anchor in CITATION.findall(path.read_text(encoding="utf-8", errors="replace")):
                where = f"{path.relative_to(ROOT)} cites docs/{page}{'#' + anchor if anchor else ''}"
                assert (ROOT / "docs" / page).is_file(), f"{where}: no such page"
                if anchor:
                    parser = _Ids()
                    parser.feed(_page(site, f"docs/{page}").read_text(encoding="utf-8"))
                    assert anchor in parser.ids, f"{where}: no such heading"
                cited += 1
    assert cited >= 3
