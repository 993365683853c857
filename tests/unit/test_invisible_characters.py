"""Invisible characters are a class: every format character (Unicode category Cf), line
and paragraph separator (Zl, Zp), space other than U+0020 (Zs), control (Cc), surrogate
(Cs), unassigned code point (Cn) and Default_Ignorable character is refused wherever
control characters are refused (the inventory file, names, addresses, paths, commands)
and escaped wherever outside text is printed. The tests enumerate the categories from
`unicodedata` itself, so nothing rests on a list of code points kept by hand."""

from __future__ import annotations

import sys
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner

from provision.cli import main
from provision.inventory.errors import InventoryError
from provision.inventory.fields import check_address, check_command, check_name, check_path
from provision.inventory.source import load_yaml_text
from provision.text import is_unsafe, printable, unsafe


def category(*cats: str) -> list[str]:
    return [chr(i) for i in range(sys.maxunicode + 1)
            if unicodedata.category(chr(i)) in cats]


CF = category("Cf")
SEPARATORS = category("Zl", "Zp") + [c for c in category("Zs") if c != " "]
# Default_Ignorable_Code_Point outside Cf/Cc/Cn (DerivedCoreProperties.txt, Unicode 15).
IGNORABLE_LETTERS = ["\u034f", "\u115f", "\u1160", "\u17b4", "\u17b5", "\u180b", "\u180c",
                     "\u180d", "\u180f", "\u3164", "\ufe00", "\ufe0f", "\uffa0",
                     "\U000e0100", "\U000e01ef"]


def test_the_categories_are_what_the_issue_names() -> None:
    """Cf holds soft hyphen, zero-width and word joiners, Arabic letter mark, interlinear
    annotation, tag characters, bidi controls and the BOM: the enumeration is real."""
    for c in ("\u00ad", "\u200b", "\u200c", "\u200d", "\u2060", "\u061c", "\ufff9", "\ufffb",
              "\U000e0001", "\U000e0041", "\u202e", "\u2066", "\ufeff"):
        assert c in CF, f"U+{ord(c):04X}"
    assert len(CF) > 150 and len(SEPARATORS) >= 18


@pytest.mark.parametrize(("name", "chars"), [("Cf", CF), ("Zl/Zp/Zs", SEPARATORS),
                                             ("Cc", category("Cc")),
                                             ("ignorable", IGNORABLE_LETTERS)])
def test_every_character_of_the_class_is_unsafe_and_escaped(name: str, chars: list[str]) -> None:
    for c in chars:
        assert is_unsafe(c), f"{name} U+{ord(c):04X} {unicodedata.name(c, '?')} not refused"
        assert unsafe(f"gpu{c}1") == c
        shown = printable(f"gpu{c}1")
        assert shown.isascii() and shown.isprintable() and shown != f"gpu{c}1", shown


def test_surrogates_and_unassigned_are_escaped() -> None:
    lone = b"\xff".decode("utf-8", errors="surrogateescape")  # undecodable host output
    assert unicodedata.category(lone) == "Cs" and printable(lone) == "\\udcff"
    unassigned = next(c for c in map(chr, range(0x0378, 0x0400)) if unicodedata.category(c) == "Cn")
    assert unsafe(unassigned) == unassigned


def test_visible_text_is_left_alone() -> None:
    for text in ("gpu1", "Zürich", "東京", "émoji ✓", "a b", "ǅ", "\u0301"):  # combining acute: Mn, visible
        assert unsafe(text) is None and printable(text) == text


@pytest.mark.parametrize("c", CF + SEPARATORS, ids=lambda c: f"U+{ord(c):04X}")
def test_the_inventory_file_refuses_it(c: str) -> None:
    """Anywhere in the file, a comment included: the reviewer does not see it."""
    with pytest.raises(InventoryError) as e:
        load_yaml_text(f"version: 1\n# note{c}here\nhosts: {{}}\n", "inv.yml")
    assert e.value.problems[0].line == 2
    assert printable(c) in str(e.value)


def test_fields_refuse_every_format_character_given_as_a_yaml_escape() -> None:
    """A double-quoted YAML escape ("\\u200b") keeps the file itself clean ASCII: the field
    checks refuse the character by category too."""
    for c in CF + SEPARATORS + IGNORABLE_LETTERS:
        for check in (check_name, check_address, check_path, check_command):
            with pytest.raises(ValueError):
                check(f"gpu{c}1")


@pytest.mark.parametrize("c", ["\u00ad", "\u2060", "\u061c", "\ufff9", "\U000e0041", "\u3164"],
                         ids=["soft-hyphen", "word-joiner", "arabic-letter-mark",
                              "interlinear-annotation", "tag-A", "hangul-filler"])
def test_check_refuses_it_with_file_line_and_exit_2(c: str, tmp_path: Path) -> None:
    path = tmp_path / "inventory.yml"
    escaped = f"\\U{ord(c):08x}" if ord(c) > 0xFFFF else f"\\u{ord(c):04x}"
    path.write_text('version: 1\nhosts:\n  gpu1:\n    address: 10.0.1.21\n'
                    f'    services: {{model: {{port: 8000, command: "/opt/run{escaped} --port {{port}}"}}}}\n')
    r = CliRunner().invoke(main, ["check", "-i", str(path)])
    assert r.exit_code == 2, r.output
    assert f"{path}:5:" in r.stderr and printable(c) in r.stderr
    assert c not in r.stderr + r.stdout
