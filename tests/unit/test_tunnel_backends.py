"""Tunnel backends are a registry: each module registers itself with its availability check,
`auto` takes the first usable one, and the CLI names none of them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from provision.errors import UsageError
from provision.tunnel import backends as B


def test_every_registered_backend_loads_and_names_itself() -> None:
    assert B.names() == ("openssh", "paramiko")
    for name in B.names():
        spec = B.spec(name)
        assert spec.name == name and spec.summary


def test_auto_takes_the_first_usable_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no ssh binary: openssh is not usable
    assert B.spec("openssh").unavailable() == "no `ssh` on PATH"
    assert B.choose(None).name == "paramiko"
    assert B.choose("auto").name == "paramiko"


def test_asking_for_a_backend_that_is_not_usable_says_why_and_what_else(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UsageError, match=r"--backend openssh: no `ssh` on PATH \(try --backend paramiko\)"):
        B.choose("openssh")


def test_an_unknown_backend_lists_the_registered_ones() -> None:
    with pytest.raises(UsageError, match=r"unknown tunnel backend 'sshtunnel' \(allowed: auto, openssh, paramiko\)"):
        B.choose("sshtunnel")


def test_no_usable_backend_at_all_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UsageError, match=r"no tunnel backend is usable here \(openssh: no `ssh` on PATH\)"):
        B.choose(None, registry=("openssh",))


def test_the_cli_picks_no_backend_by_name() -> None:
    source = (Path(B.__file__).parents[1] / "commands" / "tunnel.py").read_text()
    named = [n for n in B.names() if re.search(rf"[\"']{n}[\"']", source)]
    assert named == [], f"commands/tunnel.py names backends {named}: use provision.tunnel.backends"
