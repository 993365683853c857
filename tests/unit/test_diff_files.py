"""Managed files and leftover temp files (the batch script run by sh: tests/integration/test_batch_script.py)."""

from __future__ import annotations

from provision.facts import FileFact
from provision.steps.actions import RemoveTemps, SetAttrs, WriteFile
from provision.steps.files import cleanup, diff_file, sha256

WANT = WriteFile("/etc/x.conf", "a\nb\n", 0o640, "root", "adm")


def test_absent_file_is_created() -> None:
    assert diff_file(FileFact("/etc/x.conf", "absent"), WANT) == [WANT]


def test_changed_content_is_rewritten_with_old_content_for_the_diff() -> None:
    fact = FileFact("/etc/x.conf", "file", sha256("a\n"), 0o640, "root", "adm", 1, "a\n")
    [w] = diff_file(fact, WANT)
    assert isinstance(w, WriteFile) and w.old == "a\n" and w.content == "a\nb\n"


def test_same_content_wrong_mode_only_fixes_attributes() -> None:
    fact = FileFact("/etc/x.conf", "file", sha256("a\nb\n"), 0o644, "root", "root", 1, "a\nb\n")
    assert diff_file(fact, WANT) == [SetAttrs("/etc/x.conf", 0o640, "root", "adm")]


def test_identical_is_a_no_op() -> None:
    fact = FileFact("/etc/x.conf", "file", sha256("a\nb\n"), 0o640, "root", "adm", 1, "a\nb\n")
    assert diff_file(fact, WANT) == []


def test_temp_files_are_cleaned() -> None:
    assert cleanup(()) == []
    assert cleanup(("/etc/.provision-tmp.abc",)) == [RemoveTemps(("/etc/.provision-tmp.abc",))]
