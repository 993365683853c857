"""The probe's answer as a whole: its framing and the request's arguments. What each fact
parses from its records is in tests/facts (fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.facts import FactsError, Request, parse

FIX = Path(__file__).parent.parent / "fixtures" / "facts"


def read(name: str) -> str:
    return (FIX / name).read_text()


def test_truncated_answer_is_refused() -> None:
    with pytest.raises(FactsError, match="truncated"):
        parse(read("truncated.txt"))


def test_not_a_probe_answer() -> None:
    with pytest.raises(FactsError, match="not a provision probe"):
        parse("sudo: a password is required\n")


def test_request_args_merge_without_duplicates() -> None:
    a = Request(files=("/a",), users=("alice",), units=("u.service",))
    b = Request(files=("/a", "/b"), packages=("htop",))
    assert a.merge(b).args() == ["F:/a", "F:/b", "U:alice", "S:u.service", "P:htop"]
