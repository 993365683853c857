"""Cross-layer findings that join the security groups with the host firewall."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from provision.cli import main
from provision.exposure import Finding, findings
from provision.inventory import load_inventory

EXAMPLE = Path(__file__).parents[2] / "inventories" / "example.yml"


def inventory(tmp_path: Path, groups: dict[str, Any], host: dict[str, Any] | None = None) -> Path:
    gpu1: dict[str, Any] = {
        "address": "10.0.1.21", "via": "jump", "security_groups": ["gpu"],
        "services": {"jupyter": {}, "model-api": {"port": 8000, "bind": "0.0.0.0",
                                                 "expose": {"from": ["0.0.0.0/0", "::/0"]},
                                                 "command": "/opt/venv/bin/api {port}"}},
    }
    gpu1.update(host or {})
    doc = {"version": 1,
           "bastions": {"jump": {"address": "198.51.100.10", "allow_ssh_from": ["203.0.113.0/24"],
                                 "egress": ["10.0.0.5/32"], "security_groups": ["bastion"]}},
           "hosts": {"gpu1": gpu1},
           "aws": {"region": "us-east-1", "security_groups": {
               "bastion": {"vpc": "vpc-0abc1234", "ingress": [{"port": 22, "from": ["203.0.113.0/24"]}]},
               **groups}}}
    path = tmp_path / "inv.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


OK_GPU = {"vpc": "vpc-0abc1234", "ingress": [
    {"port": 22, "from": ["bastion"]}, {"port": 8000, "from": ["0.0.0.0/0", "::/0"]}]}


def found(path: Path, prefix: str = "sg-") -> list[Finding]:
    return [f for f in findings(load_inventory(path)) if f.code.startswith(prefix)]


def codes(path: Path) -> list[tuple[str, str, str]]:
    return sorted((f.severity, f.code, f.subject) for f in found(path))


def test_example_is_clean() -> None:
    assert [f for f in findings(load_inventory(EXAMPLE)) if f.code.startswith("sg-")] == []


def test_consistent_layers_are_clean(tmp_path: Path) -> None:
    assert codes(inventory(tmp_path, {"gpu": OK_GPU})) == []


def test_ssh_and_jupyter_open_to_the_internet_in_disguise(tmp_path: Path) -> None:
    gpu = {"vpc": "vpc-0abc1234", "ingress": [
        *OK_GPU["ingress"],
        {"port": 22, "from": ["0.0.0.0/1", "128.0.0.0/1"]},
        {"ports": [6000, 9000], "from": ["2000::/3"]},
    ]}
    got = codes(inventory(tmp_path, {"gpu": gpu}, {"ssh_from": ["0.0.0.0/1", "128.0.0.0/1"],
                                                   "services": {"jupyter": {"port": 8889}}}))
    assert ("warning", "sg-ssh-open-to-world", "sg/gpu") in got
    # 6006 and 8888 (the catalog ports) and 8889 (gpu1's jupyter) are all in 6000-9000
    code_exec = [f for f in found(inventory(tmp_path, {"gpu": gpu}, {"services": {"jupyter": {"port": 8889}}}))
                 if f.code == "sg-code-exec-public"]
    assert sorted(int(re.search(r"port (\d+)", f.message).group(1)) for f in code_exec) == [6006, 8888, 8889]  # type: ignore[union-attr]
    assert all(f.severity == "error" and "2000::/3" in f.message for f in code_exec)


def test_half_the_internet_is_not_flagged(tmp_path: Path) -> None:
    gpu = {"vpc": "vpc-0abc1234", "ingress": [*OK_GPU["ingress"], {"port": 22, "from": ["128.0.0.0/1"]}]}
    assert "sg-ssh-open-to-world" not in [c for _, c, _ in codes(inventory(tmp_path, {"gpu": gpu}))]


def test_all_protocol_from_everywhere_opens_everything(tmp_path: Path) -> None:
    gpu = {"vpc": "vpc-0abc1234", "ingress": [{"protocol": "all", "from": ["0.0.0.0/0", "::/0"]}]}
    got = codes(inventory(tmp_path, {"gpu": gpu}))
    assert ("warning", "sg-ssh-open-to-world", "sg/gpu") in got
    assert ("error", "sg-code-exec-public", "sg/gpu") in got
    assert ("error", "sg-admits-tunnel-service", "gpu1/jupyter") in got
    assert ("warning", "sg-port-dropped-by-host", "gpu1") in got


def test_port_the_host_firewall_drops(tmp_path: Path) -> None:
    gpu = {"vpc": "vpc-0abc1234", "ingress": [
        *OK_GPU["ingress"], {"port": 9000, "from": ["10.0.0.0/8"]},
        {"protocol": "udp", "port": 51820, "from": ["10.0.0.0/8"]}]}
    dropped = [f for f in found(inventory(tmp_path, {"gpu": gpu})) if f.code == "sg-port-dropped-by-host"]
    assert [f.severity for f in dropped] == ["warning", "warning"]
    assert {f.field for f in dropped} == {"aws.security_groups.gpu.ingress[2]", "aws.security_groups.gpu.ingress[3]"}


def test_ssh_from_a_source_the_host_does_not_admit(tmp_path: Path) -> None:
    gpu = {"vpc": "vpc-0abc1234", "ingress": [*OK_GPU["ingress"], {"port": 22, "from": ["192.0.2.0/24"]}]}
    dropped = [f for f in found(inventory(tmp_path, {"gpu": gpu})) if f.code == "sg-port-dropped-by-host"]
    assert len(dropped) == 1 and "tcp 22 from 192.0.2.0/24" in dropped[0].message


def test_public_service_no_group_admits(tmp_path: Path) -> None:
    gpu = {"vpc": "vpc-0abc1234", "ingress": [{"port": 22, "from": ["bastion"]},
                                               {"port": 8000, "from": ["0.0.0.0/0"]}]}
    got = [f for f in found(inventory(tmp_path, {"gpu": gpu})) if f.code == "sg-public-service-unreachable"]
    assert len(got) == 1
    assert got[0].severity == "error" and got[0].subject == "gpu1/model-api"
    assert "unreachable from ::/0" in got[0].message
    assert got[0].field == "hosts.gpu1.services.model-api"


def test_public_service_admitted_through_a_second_group(tmp_path: Path) -> None:
    gpu = {"vpc": "vpc-0abc1234", "ingress": [{"port": 22, "from": ["bastion"]}]}
    api = {"vpc": "vpc-0abc1234", "ingress": [{"ports": [8000, 8001], "from": ["0.0.0.0/1", "128.0.0.0/1"]},
                                               {"port": 8000, "from": ["::/0"]}]}
    got = codes(inventory(tmp_path, {"gpu": gpu, "api": api}, {"security_groups": ["gpu", "api"]}))
    assert ("error", "sg-public-service-unreachable", "gpu1/model-api") not in got
    assert ("warning", "sg-port-dropped-by-host", "gpu1") in got  # 8001 serves nothing


def test_group_rule_reaching_a_tunnel_only_service(tmp_path: Path) -> None:
    gpu = {"vpc": "vpc-0abc1234", "ingress": [*OK_GPU["ingress"], {"port": 8888, "from": ["10.0.0.0/8"]}]}
    got = found(inventory(tmp_path, {"gpu": gpu}))
    assert [(f.severity, f.code, f.subject) for f in got] == [("error", "sg-admits-tunnel-service", "gpu1/jupyter")]
    assert got[0].field == "aws.security_groups.gpu.ingress[2]"


def test_machines_without_groups_are_not_joined(tmp_path: Path) -> None:
    gpu = {"vpc": "vpc-0abc1234", "ingress": [{"port": 8888, "from": ["10.0.0.0/8"]}]}
    assert codes(inventory(tmp_path, {"gpu": gpu}, {"security_groups": []})) == []


def test_check_exits_1_and_points_at_the_rule(tmp_path: Path) -> None:
    gpu = {"vpc": "vpc-0abc1234", "ingress": [*OK_GPU["ingress"], {"port": 8888, "from": ["0.0.0.0/0"]}]}
    path = inventory(tmp_path, {"gpu": gpu})
    result = CliRunner().invoke(main, ["check", "-i", str(path), "--json"])
    assert result.exit_code == 1
    import json

    data = json.loads(result.output)
    hit = next(f for f in data["findings"] if f["code"] == "sg-code-exec-public")
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "8888" in text)
    assert hit["location"].startswith(f"{path}:{line}:")


def test_a_rule_admitting_a_machines_public_address_inside_its_vpc(tmp_path: Path) -> None:
    """The elastic-IP mistake: the gpu group admits the bastion's public address, but
    inside the VPC the bastion's connections come from its private address."""
    gpu = {"vpc": "vpc-0abc1234", "ingress": [
        {"port": 22, "from": ["bastion"]}, {"port": 8000, "from": ["0.0.0.0/0", "::/0"]},
        {"port": 8000, "from": ["192.0.2.10/32", "192.0.2.0/24"]}]}
    path = inventory(tmp_path, {"gpu": gpu})
    doc = yaml.safe_load(path.read_text())
    doc["bastions"]["jump"]["public_address"] = "192.0.2.10"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    [f] = found(path, "sg-source-public-address")
    assert f.subject == "sg/gpu" and f.severity == "warning"
    assert "admits 192.0.2.10/32, the public_address of jump" in f.message
    assert f.fix == "use its group (bastion) as the source, or its private address"
    assert f.field == "aws.security_groups.gpu.ingress[2]"
    # in another VPC it does come from its public address: no finding
    doc["aws"]["security_groups"]["bastion"]["vpc"] = "vpc-0def5678"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert found(path, "sg-source-public-address") == []
