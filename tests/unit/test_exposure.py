"""Cross-layer findings from plain inventories."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from provision.cli import main
from provision.exposure import findings
from provision.firewall.rules import input_ruleset
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


def test_check_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".ssh").mkdir()  # the example's key, ~/.ssh/id_ed25519 (check looks at it)
    (tmp_path / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    monkeypatch.setenv("HOME", str(tmp_path))
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


_PUBLIC = """hosts:
  gpu1:
    address: 10.0.0.1
    via: jump
    services:
      api:
        port: 8000
        command: /opt/api/bin/serve
        expose: {from: [0.0.0.0/0, "::/0"]}
"""
_ZONE = """dns:
  zones:
    example.org: {provider: route53}
"""
_KEY = "sha256:" + "ab" * 32


def test_plain_http_to_the_internet_is_an_error(tmp_path: Path) -> None:
    # the example's model-api as it was: bound to 0.0.0.0:8000, open to the world, "no findings"
    got = codes(tmp_path, _PUBLIC.replace("port: 8000", "port: 8000\n        bind: 0.0.0.0"))
    assert got == {"plain-http-public": "error"}


def test_plain_http_with_a_reason_is_accepted(tmp_path: Path) -> None:
    got = codes(tmp_path, _PUBLIC.replace("port: 8000", "port: 8000\n        bind: 0.0.0.0\n"
                                          "        plain_http: a public mirror of open data"))
    assert got == {}


def test_plain_http_to_a_private_range_is_not_the_internet(tmp_path: Path) -> None:
    got = codes(tmp_path, _PUBLIC.replace('[0.0.0.0/0, "::/0"]', "[10.0.0.0/8]")
                .replace("port: 8000", "port: 8000\n        bind: 0.0.0.0"))
    assert got == {}


def test_door_without_keys_is_a_warning_naming_it(tmp_path: Path) -> None:
    p = tmp_path / "inv.yml"
    p.write_text(HEAD + _PUBLIC + "        https: {name: api.example.org}\n" + _ZONE)
    found = findings(load_inventory(p))
    assert [(f.code, f.severity, f.subject) for f in found] == [("door-without-keys", "warning", "gpu1/api")]
    assert "https://api.example.org:443" in found[0].message


def test_door_with_keys_is_clean_and_opens_its_own_port(tmp_path: Path) -> None:
    got = codes(tmp_path, _PUBLIC + f"        https: {{name: api.example.org, keys: {{alice: '{_KEY}'}}}}\n"
                + _ZONE)
    assert got == {}
    inv = load_inventory(tmp_path / "inv.yml")
    ports = {r.dport for r in input_ruleset(inv, inv.hosts[0], 4).rules if r.comment == "service api"}
    assert ports == {443}
