"""What provision prints about paths and JSON, as a real process: every outside path escaped,
no raw control character in --json output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.text import printable
from tests.unit.test_output_escaping import HOSTILE, LITERAL, assert_clean, inventory

# One string with every kind of attack on a terminal, and markup for rich.
# What must be printed instead: every unsafe character escaped, markup as it was.
# The same as a file name ('/' cannot be in one).
NAME = HOSTILE.replace("/", "_")
LITERAL_NAME = tuple(x.replace("/", "_") for x in LITERAL)


# --- the CLI as a subprocess: the real stdout and stderr ----------------------------------------

def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Any:
    full = {**os.environ, "TTY_COMPATIBLE": "1", "FORCE_COLOR": "1", "COLUMNS": "1000",
            **(env or {})}
    full.pop("NO_COLOR", None)
    return subprocess.run([sys.executable, "-m", "provision", *args], capture_output=True,
                          env=full, cwd=cwd, timeout=120)


def hostile_dir(tmp_path: Path) -> Path:
    d = tmp_path / NAME
    d.mkdir()
    return d


@pytest.mark.parametrize("findings", [False, True], ids=["no-findings", "findings-table"])
def test_check_prints_the_inventory_path_escaped(tmp_path: Path, findings: bool) -> None:
    d = hostile_dir(tmp_path)
    # a service bound to 0.0.0.0 behind a tunnel: a finding, so the table path prints too
    extra = {"services": {"jupyter": {"bind": "0.0.0.0"}}} if findings else {}
    path = d / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory(**extra)))
    r = run("check", "-i", str(path))
    assert r.returncode in (0, 1), r.stderr
    out = assert_clean(r.stdout + r.stderr, *LITERAL_NAME)
    assert printable(str(path)) in out.replace("\n", "")


def test_a_refused_inventory_path_is_escaped_on_stderr(tmp_path: Path) -> None:
    path = hostile_dir(tmp_path) / "inventory.yml"
    path.write_text("version: 1\nhosts: {gpu1: {address: 10.0.1.21, port: 70000}}\n")
    r = run("check", "-i", str(path))
    assert r.returncode == 2
    assert_clean(r.stdout + r.stderr, *LITERAL_NAME, printable(NAME))


def test_render_out_dir_is_escaped(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory()))
    out = hostile_dir(tmp_path) / "out"
    r = run("render", "-i", str(path), "--out", str(out))
    assert r.returncode == 0, r.stderr
    plain = assert_clean(r.stdout + r.stderr, *LITERAL_NAME)
    assert f"to {printable(str(out))}/" in plain
    assert (out / "ssh_config").is_file()


def test_ssh_config_write_reports_paths_escaped(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory()))
    home = hostile_dir(tmp_path)
    r = run("ssh-config", "-i", str(path), "--write", env={"HOME": str(home)})
    assert r.returncode == 0, r.stderr
    plain = assert_clean(r.stdout + r.stderr, *LITERAL_NAME)
    assert printable(str(home / ".ssh" / "config.d" / "provision.conf")) in plain


# --- in process, a real rich Console on a terminal ----------------------------------------------


def test_json_output_holds_no_raw_control_character(tmp_path: Path) -> None:
    d = hostile_dir(tmp_path)
    path = d / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory()))
    r = run("check", "-i", str(path), "--json")
    assert r.returncode == 0, r.stderr
    assert_clean(r.stdout + r.stderr)
