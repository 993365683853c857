"""Every validation problem in one run (issue 39): the cross-checks run on what the schema
accepted (provision.inventory.salvage), and say nothing false about what it refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.inventory import InventoryError, load_inventory

ALICE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILQQc5Q1m/GycS3jiWPZdNUNJFj+0j9HlztUCl1sn2/X alice@laptop"


def _problems(tmp_path: Path, text: str) -> list[str]:
    p = tmp_path / "inventory.yml"
    p.write_text(text)
    with pytest.raises(InventoryError) as e:
        load_inventory(p)
    return [f"{x.line} {x.field}: {x.message}" for x in e.value.problems]


def test_a_schema_error_and_a_cross_check_error_in_one_run(tmp_path: Path) -> None:
    got = _problems(tmp_path, f"""version: 1
team:
  alice: {{keys: ["{ALICE}"]}}
hosts:
  gpu1:
    address: 10.0.1.21
    services:
      jupyter: {{per_user: [alcie]}}
      tensorboard: {{logdir: srv/runs}}
""")
    assert [g.split(":")[0] for g in got] == [
        "8 hosts.gpu1.services.jupyter.per_user[0]", "9 hosts.gpu1.services.tensorboard.logdir"]


def test_a_refused_team_member_is_not_reported_again_where_it_is_named(tmp_path: Path) -> None:
    """A member whose key is refused cannot be cut (others name it): the schema's problem
    alone, never "'alice' is not a team member"."""
    got = _problems(tmp_path, """version: 1
team:
  alice: {keys: ["ssh-dss AAAA alice@old"]}
hosts:
  gpu1:
    address: 10.0.1.21
    services: {jupyter: {per_user: [alice]}, tensorboard: {group: alice}}
""")
    assert len(got) == 1 and got[0].startswith("3 team.alice.keys[0]"), got


def test_a_refused_security_group_is_not_unknown_where_it_is_named(tmp_path: Path) -> None:
    got = _problems(tmp_path, """version: 1
aws:
  region: us-east-1
  security_groups:
    gpu: {vpc: vpc-XYZ}
hosts:
  gpu1: {address: 10.0.1.21, security_groups: [gpu]}
""")
    assert len(got) == 1 and got[0].startswith("5 aws.security_groups.gpu.vpc"), got


def test_a_misspelt_optional_key_does_not_make_the_rest_of_its_entry_wrong(tmp_path: Path) -> None:
    """`logdr` is cut; the service then has no logdir, and "the command uses {logdir}"
    would be about the cut, not the file: problems inside that service are left out."""
    got = _problems(tmp_path, """version: 1
hosts:
  gpu1:
    address: 10.0.1.21
    via: nowhere
    services:
      board: {port: 7000, command: "/opt/tb/bin/tensorboard --logdir {logdir}", logdr: /srv/runs}
""")
    assert [g.split(":")[0] for g in got] == ["5 hosts.gpu1.via", "7 hosts.gpu1.services.board.logdr"], got


def test_a_value_of_the_wrong_shape_is_reported_once(tmp_path: Path) -> None:
    """`values` cut from the record: "an A record takes 'values'" is the same problem again."""
    got = _problems(tmp_path, """version: 1
dns:
  zones:
    example.org:
      provider: route53
      records:
        api: {type: A, values: 10.0.0.5}
        www: {type: A, values: [10.0.0.256]}
""")
    assert [g.split(":")[0] for g in got] == ["7 dns.zones.example.org.records.api.values",
                                             "8 dns.zones.example.org.records.www.values[0]"], got


def test_a_misspelt_required_key_is_read_as_the_field_it_suggests(tmp_path: Path) -> None:
    """`adress` beside a missing `address`: the host is still checked (its unknown role)."""
    got = _problems(tmp_path, """version: 1
hosts:
  gpu1:
    adress: 10.0.1.21
    roles: [gpu]
""")
    assert [g.split(":")[0] for g in got] == ["3 hosts.gpu1.address", "4 hosts.gpu1.adress",
                                             "5 hosts.gpu1.roles[0]"], got
