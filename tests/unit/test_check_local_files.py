"""`provision check` looks at the SSH files the inventory names on this machine (issue 39):
a key or known_hosts file plan would fail on is an error (exit 2, file:line, the field),
one plan can do without a warning; in the same run as the inventory's other problems."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner, Result

from provision.cli import main
from provision.inventory.source import load_source
from provision.ssh import local_files

ALICE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILQQc5Q1m/GycS3jiWPZdNUNJFj+0j9HlztUCl1sn2/X alice@laptop"
PRIVATE = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"


def _inventory(tmp_path: Path, defaults: str, more: str = "") -> Path:
    p = tmp_path / "inventory.yml"
    p.write_text(f"version: 1\ndefaults:\n{defaults}"
                 f"hosts:\n  gpu1: {{address: 10.0.1.21, ssh_from: [10.0.0.0/8]}}\n{more}")
    return p


def _check(p: Path, *options: str) -> Result:
    return CliRunner().invoke(main, ["check", "-i", str(p), *options])


def test_a_misspelt_key_is_an_error_at_its_line(tmp_path: Path) -> None:
    key = tmp_path / "id_ed25519"
    key.write_text(PRIVATE)
    inv = _inventory(tmp_path, f"  identity_file: {tmp_path}/id_ed2551\n")
    r = _check(inv)
    assert r.exit_code == 2, r.output
    assert f"{inv}:3:3: defaults.identity_file: {tmp_path}/id_ed2551 does not exist" in r.stderr
    assert "--no-local-files" in r.stderr
    inv = _inventory(tmp_path, f"  identity_file: {key}\n")  # the control: the right path
    assert _check(inv).exit_code == 0, _check(inv).output


def test_a_key_plan_cannot_load_is_an_error(tmp_path: Path) -> None:
    """A public key, a directory, a FIFO (opened without blocking): each refused."""
    (tmp_path / "id.pub").write_text(ALICE + "\n")
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    for name, says in (("id.pub", "is a public key"), ("dir", "is a directory"),
                       ("fifo", "is a FIFO (named pipe)")):
        inv = _inventory(tmp_path, f"  identity_file: {tmp_path / name}\n")
        r = _check(inv)
        assert r.exit_code == 2 and says in r.stderr, (name, r.output)
        assert f"{inv}:3:3: defaults.identity_file: " in r.stderr


def test_a_key_held_by_the_agent_is_a_warning(tmp_path: Path) -> None:
    """Only the .pub on disk (a key in ssh-agent, a hardware key): plan may log in."""
    (tmp_path / "id.pub").write_text(ALICE + "\n")
    r = _check(_inventory(tmp_path, f"  identity_file: {tmp_path}/id\n"), "--json")
    assert r.exit_code == 0, r.output
    assert '"code": "ssh-file"' in r.stdout and "ssh-agent" in r.stdout


def test_a_default_key_no_node_uses_is_not_looked_at(tmp_path: Path) -> None:
    key = tmp_path / "k"
    key.write_text(PRIVATE)
    inv = tmp_path / "inventory.yml"
    inv.write_text(f"version: 1\ndefaults: {{identity_file: {tmp_path}/nope}}\nhosts:\n"
                   f"  gpu1: {{address: 10.0.1.21, ssh_from: [10.0.0.0/8], identity_file: {key}}}\n")
    assert _check(inv).exit_code == 0, _check(inv).output
    inv.write_text(f"version: 1\nhosts:\n  gpu1: {{address: 10.0.1.21, ssh_from: [10.0.0.0/8], "
                   f"identity_file: {tmp_path}/nope}}\n")
    r = _check(inv)
    assert r.exit_code == 2 and f"{inv}:3:" in r.stderr and "hosts.gpu1.identity_file" in r.stderr


def test_known_hosts_missing_is_a_warning_unreadable_an_error(tmp_path: Path) -> None:
    r = _check(_inventory(tmp_path, f"  known_hosts: {tmp_path}/known_hosts\n"), "--json")
    assert r.exit_code == 0 and "--accept-new" in r.stdout, r.output  # the first run makes it
    inv = _inventory(tmp_path, f"  known_hosts: {tmp_path}/nodir/known_hosts\n")
    r = _check(inv)
    assert r.exit_code == 2 and f"{inv}:3:3: defaults.known_hosts: " in r.stderr, r.output
    assert "nor its directory" in r.stderr
    (tmp_path / "known_hosts.d").mkdir()
    r = _check(_inventory(tmp_path, f"  known_hosts: {tmp_path}/known_hosts.d\n"))
    assert r.exit_code == 2 and "known_hosts.d: Is a directory" in r.stderr, r.output


def test_a_members_key_is_a_warning(tmp_path: Path) -> None:
    """Only `tunnel --user alice` on alice's machine uses it."""
    inv = _inventory(tmp_path, "  user: ubuntu\n",
                     f"team:\n  alice:\n    keys: [\"{ALICE}\"]\n    identity_file: {tmp_path}/alice\n")
    r = _check(inv, "--json")
    assert r.exit_code == 0, r.output
    assert "team.alice.identity_file" in r.stdout and "not on this machine" in r.stdout


def test_file_problems_come_with_the_schema_problems(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, f"  identity_file: {tmp_path}/nope\n  port: '22'\n")
    r = _check(inv)
    assert r.exit_code == 2
    assert "defaults.identity_file" in r.stderr and "defaults.port" in r.stderr, r.stderr


def test_no_local_files_looks_at_none(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, f"  identity_file: {tmp_path}/nope\n  known_hosts: /nodir/known_hosts\n")
    r = _check(inv, "--no-local-files")
    assert r.exit_code == 0 and "identity_file" not in r.output, r.output


def test_named_lists_each_file_where_it_is_named(tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yml"
    inv.write_text(f"""version: 1
defaults: {{identity_file: ~/.ssh/id, known_hosts: ~/.ssh/known_hosts}}
team:
  alice: {{keys: ["{ALICE}"], identity_file: ~/.ssh/alice}}
bastions:
  jump: {{address: 203.0.113.1, identity_file: ~/.ssh/jump}}
hosts:
  gpu1: {{address: 10.0.1.21, identity_file: [not, a, path]}}
  gpu2: {{address: 10.0.1.22, identity_file: "a b"}}
""")
    got = [(f.field, f.path, f.kind) for f in local_files.named(load_source(inv))]
    # gpu1's and gpu2's values are the schema's to refuse (its message, not a second one);
    # every node names a key of its own, so the default is used by none
    assert got == [
        (("bastions", "jump", "identity_file"), "~/.ssh/jump", "identity"),
        (("defaults", "known_hosts"), "~/.ssh/known_hosts", "known-hosts"),
        (("team", "alice", "identity_file"), "~/.ssh/alice", "member-identity")]
