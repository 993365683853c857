"""Cross-layer findings from plain inventories."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from provision.cli import main
from provision.exposure import findings
from provision.inventory import load_inventory

HEAD = """version: 1
bastions:
  jump: {address: 203.0.113.1, allow_ssh_from: [203.0.113.0/24]}
"""


def codes(tmp_path: Path, body: str) -> dict[str, str]:
    p = tmp_path / "inv.yml"
    p.write_text(HEAD + body)
    return {f.code: f.severity for f in findings(load_inventory(p))}


def test_clean_example_has_no_findings() -> None:
    assert findings(load_inventory(Path(__file__).parents[2] / "inventories" / "example.yml")) == ()


def test_public_but_loopback(tmp_path: Path) -> None:
    got = codes(tmp_path, """hosts:
  gpu1: {address: 10.0.0.1, via: jump, services: {api: {port: 8000, command: x, expose: {from: [10.0.0.0/8]}}}}
""")
    assert got == {"public-but-loopback": "warning"}


def test_wildcard_bind_on_tunnel_service(tmp_path: Path) -> None:
    got = codes(tmp_path, "hosts:\n  gpu1: {address: 10.0.0.1, via: jump, services: {mlflow: {bind: 0.0.0.0}}}\n")
    assert got == {"needlessly-exposed": "warning"}


def test_jupyter_to_the_world_is_an_error(tmp_path: Path) -> None:
    got = codes(tmp_path, """hosts:
  gpu1: {address: 10.0.0.1, via: jump, services: {jupyter: {bind: 0.0.0.0, expose: {from: ["::/0"]}}}}
""")
    assert got == {"code-exec-public": "error"}


def test_ssh_open_to_world_and_no_operator_path(tmp_path: Path) -> None:
    got = codes(tmp_path, """hosts:
  open: {address: 10.0.0.1, ssh_from: [0.0.0.0/0]}
  closed: {address: 10.0.0.2}
""")
    assert got == {"ssh-open-to-world": "warning", "no-operator-path": "error"}


def test_bastion_without_egress_gives_no_operator_path(tmp_path: Path) -> None:
    p = tmp_path / "inv.yml"
    p.write_text("version: 1\nbastions:\n  j: {address: jump.example.org}\nhosts:\n  g: {address: 10.0.0.1, via: j}\n")
    by_subject = {f.subject: f for f in findings(load_inventory(p))}
    assert by_subject["g"].code == "no-operator-path" and "egress" in by_subject["g"].message
    assert by_subject["j"].code == "no-operator-path"  # the bastion has no allow_ssh_from either


def test_two_services_on_one_port(tmp_path: Path) -> None:
    got = codes(tmp_path, """hosts:
  gpu1: {address: 10.0.0.1, via: jump, services: {jupyter: {}, api: {port: 8888, command: x, bind: 0.0.0.0, expose: {from: [10.0.0.0/8]}}}}
""")
    assert got["port-clash"] == "error"


def test_forward_collision_across_hosts(tmp_path: Path) -> None:
    got = codes(tmp_path, """hosts:
  gpu1: {address: 10.0.0.1, via: jump, services: {jupyter: {}}}
  gpu2: {address: 10.0.0.2, via: jump, services: {jupyter: {}}}
""")
    assert got == {"forward-collision": "warning"}


def test_check_exit_codes(tmp_path: Path) -> None:
    p = tmp_path / "inv.yml"
    p.write_text(HEAD + "hosts:\n  gpu1: {address: 10.0.0.1, services: {jupyter: {}}}\n")
    result = CliRunner().invoke(main, ["check", "-i", str(p), "--json"])
    assert result.exit_code == 1
    assert '"no-operator-path"' in result.output
    ok = CliRunner().invoke(main, ["check", "-i", str(Path(__file__).parents[2] / "inventories" / "example.yml")])
    assert ok.exit_code == 0, ok.output


def test_schema_is_json_schema() -> None:
    import json

    result = CliRunner().invoke(main, ["schema"])
    schema = json.loads(result.output)
    assert schema["additionalProperties"] is False
    assert "hosts" in schema["properties"] and "version" in schema["required"]
