"""Bugs found in the review of wave 1 (issue 9), each a test that failed before its fix."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from provision.cli import COMMANDS, main
from provision.exposure import findings
from provision.inventory import load_inventory
from provision.inventory.programs import program
from provision.render import render_host
from provision.tunnel.tokens import probe_command

ROOT = Path(__file__).parents[2]
HEAD = """version: 1
bastions:
  jump: {address: 203.0.113.1, allow_ssh_from: [203.0.113.0/24]}
"""


def inv_with(tmp_path: Path, body: str):  # type: ignore[no-untyped-def]
    p = tmp_path / "inv.yml"
    p.write_text(HEAD + body)
    return load_inventory(p)


@pytest.mark.parametrize(("command", "expected"), [
    ("jupyter lab --config={config}", "jupyter"),
    ("{venv}jupyter server --port {port}", "jupyter"),
    ("/opt/venv/bin/jupyter-lab --ip {bind}", "jupyter"),
    ("python3 -m jupyterlab --port {port}", "jupyter"),
    ("/usr/bin/tensorboard --logdir {logdir}", "tensorboard"),
    ("python -m tensorboard.main --port {port}", "tensorboard"),
    ("/opt/venv/bin/uvicorn app:api --port {port}", None),
    ("jupyter-notes-exporter --port {port}", None),
    ("echo jupyter", None),
])
def test_program_is_decided_by_the_command(command: str, expected: str | None) -> None:
    assert program(command) == expected


def test_render_and_tunnel_agree_on_what_is_jupyter(tmp_path: Path) -> None:
    """Bug 1: `jupyter lab --config={config}` got a config but no token; `jupyter server`
    without {config} the reverse."""
    inv = inv_with(tmp_path, """hosts:
  gpu1:
    address: 10.0.0.1
    via: jump
    services:
      lab: {port: 8890, command: "jupyter lab --config={config}"}
      srv: {port: 8891, command: "jupyter server --port {port}"}
      api: {port: 8000, command: "uvicorn app:api --port {port}"}
""")
    host = inv.node("gpu1")
    configs = {a.service for a in render_host(inv, host) if a.kind == "jupyter-config"}
    for s in host.services:
        token = "server list --json" in probe_command([s], "admin", False)
        assert (s.unit_name in configs) == token == (s.name in ("lab", "srv")), s.name


def test_public_jupyter_under_another_name_is_an_error(tmp_path: Path) -> None:
    """Bug 2: decided by the service's name, so `notebook` open to the world passed."""
    inv = inv_with(tmp_path, """hosts:
  gpu1:
    address: 10.0.0.1
    via: jump
    services:
      notebook: {port: 8888, bind: 0.0.0.0, command: "jupyter server --port {port}",
                 expose: {from: [0.0.0.0/0]}}
""")
    got = {(f.code, f.severity, f.subject) for f in findings(inv)}
    assert ("code-exec-public", "error", "gpu1/notebook") in got


def test_every_port_clash_is_reported(tmp_path: Path) -> None:
    """Bug 3: each service was compared with the first one on its port only."""
    inv = inv_with(tmp_path, """hosts:
  gpu1:
    address: 10.0.1.21
    via: jump
    services:
      api:  {port: 8000, command: x}
      api2: {port: 8000, bind: 10.0.1.21, command: x}
      api3: {port: 8000, bind: 10.0.1.21, command: x}
""")
    clashes = [f for f in findings(inv) if f.code == "port-clash"]
    assert [f.subject for f in clashes] == ["gpu1/api3"]
    assert "api2" in clashes[0].message


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_shipped_command_resolves(name: str) -> None:
    """Bug 5: a command module that failed to import vanished from the CLI silently."""
    import click

    module, attr = COMMANDS[name][0].split(":")
    assert isinstance(getattr(importlib.import_module(module), attr), click.Command)
    assert main.get_command(None, name) is not None  # type: ignore[arg-type]


def test_commit_confirmed_is_its_own_type_not_a_plain_action() -> None:
    """Bug 6: CommitConfirmed was cast into Action; the plain executor refuses it now."""
    from provision.hosts.converge import HostRun, execute
    from provision.steps.actions import Action
    from provision.steps.commit import CommitConfirmed

    assert CommitConfirmed not in getattr(Action, "__args__", ())
    inv = load_inventory(ROOT / "inventories" / "example.yml")
    run = HostRun(inv.node("gpu1"), status="pending",
                  actions=[("sshd", CommitConfirmed("sshd", "gpu1", (), "ssh.service"))])
    with pytest.raises(TypeError, match="commit-confirmed"):
        execute(run)


def test_no_thread_pool_at_import_time() -> None:
    """Bug 7: a ThreadPoolExecutor(64) was created when the module loaded, never shut down."""
    for path in (ROOT / "provision").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module level only
            if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call):
                fn = node.value.func
                name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
                assert name not in ("ThreadPoolExecutor", "ProcessPoolExecutor"), path


def test_no_test_hooks_in_shipped_code() -> None:
    offenders = [str(p) for p in (ROOT / "provision").rglob("*.py")
                 if "PROVISION_TEST_" in p.read_text()]
    assert offenders == []
