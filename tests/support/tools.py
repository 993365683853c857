"""Helpers shared by the tests that feed rendered files to the real programs.

`ssh -G`, `iptables-restore --test` inside a throwaway network namespace, `systemd-analyze
verify`. A missing program or missing root skips with the reason; under CI=true a missing
prerequisite fails instead (the pattern of tests/lab/conftest.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

CI = os.environ.get("CI") == "true"


def need(ok: bool, reason: str) -> None:
    if ok:
        return
    if CI:
        pytest.fail(f"missing prerequisite under CI=true: {reason}")
    pytest.skip(reason)


def need_tools(*names: str) -> None:
    missing = [n for n in names if shutil.which(n) is None]
    need(not missing, f"not installed: {', '.join(missing)}")


def need_root() -> None:
    need(os.geteuid() == 0, "needs root")


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check and p.returncode != 0:
        pytest.fail(f"{' '.join(argv)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p


# --- ssh_config ------------------------------------------------------------------------------

def ssh_g(config: Path, host: str) -> list[str]:
    """`ssh -G -F CONFIG HOST`: the options ssh would use, one `key value` per line."""
    return run("ssh", "-G", "-F", str(config), host).stdout.splitlines()


# --- iptables, inside a throwaway network namespace -------------------------------------------

def make_netns() -> Iterator[str]:
    need_root()
    need_tools("ip", "iptables", "ip6tables", "iptables-restore", "ip6tables-restore")
    name = f"prv-render-{uuid.uuid4().hex[:8]}"
    run("ip", "netns", "add", name)
    try:
        yield name
    finally:
        run("ip", "netns", "delete", name, check=False)


@pytest.fixture
def netns() -> Iterator[str]:
    yield from make_netns()


def in_netns(ns: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run("ip", "netns", "exec", ns, *argv, check=check)


# --- systemd ---------------------------------------------------------------------------------

def verify_problems(*argv: str) -> list[str]:
    """What `systemd-analyze verify` says about the units (empty when it accepts them)."""
    p = run("systemd-analyze", "verify", *argv, check=False)
    problems = [ln for ln in (p.stdout + p.stderr).splitlines()
                if ln.strip() and "Failed to create" not in ln]
    if p.returncode != 0 and not problems:
        problems = [p.stderr or f"exit {p.returncode}"]
    return problems


def verify(*argv: str) -> None:
    problems = verify_problems(*argv)
    assert not problems, "\n".join(problems)


# --- systemd's own word splitting, for ExecStart= ------------------------------------------

def systemd_words(text: str) -> list[tuple[str, str]]:
    """Split one ExecStart= value as systemd does (extract_first_word with EXTRACT_UNQUOTE |
    EXTRACT_CUNESCAPE): whitespace separates words, '...' and "..." quote anywhere in a
    word, a backslash escapes the next character. Returns (word, raw text of the word).
    Raises ValueError on an open quote or a trailing backslash (systemd refuses the line)."""
    words: list[tuple[str, str]] = []
    cur: list[str] = []
    raw: list[str] = []
    in_word = False
    quote: str | None = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            raw.append(c)
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"':
                i += 1
                if i >= len(text):
                    raise ValueError("trailing backslash")
                raw.append(text[i])
                cur.append(text[i])
            else:
                cur.append(c)
        elif c in " \t":
            if in_word:
                words.append(("".join(cur), "".join(raw)))
                cur, raw, in_word = [], [], False
        elif c in "'\"":
            quote, in_word = c, True
            raw.append(c)
        elif c == "\\":
            i += 1
            if i >= len(text):
                raise ValueError("trailing backslash")
            raw += [c, text[i]]
            cur.append(text[i])
            in_word = True
        else:
            cur.append(c)
            raw.append(c)
            in_word = True
        i += 1
    if quote:
        raise ValueError("unterminated quote")
    if in_word:
        words.append(("".join(cur), "".join(raw)))
    return words


def exec_commands(value: str) -> list[tuple[str, list[str]]]:
    """ExecStart= value -> [(prefix characters, argv)], split at lone ';' words as systemd does."""
    commands: list[list[str]] = [[]]
    for word, raw in systemd_words(value):
        if raw == ";":
            commands.append([])
        else:
            commands[-1].append(word)
    out = []
    for argv in commands:
        if not argv:
            continue
        m = re.match(r"^[-@:+!]+", argv[0])
        prefix = m.group() if m else ""
        out.append((prefix, [argv[0][len(prefix):], *argv[1:]]))
    return out
