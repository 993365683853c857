"""The inventory acts on the fleet, never on the operator's own machine.

- The ssh_config that `provision ssh-config --write` installs changes `ssh NAME` only for
  the inventory's own nodes: checked with `ssh -G` against an operator config of its own,
  for names that are not nodes (public domains, the nodes' own addresses, localhost).
  Node names that could be such a name (a dot, only digits, hex, localhost) are refused at
  load time, because the Include sits at the top of ~/.ssh/config where it wins.
- `defaults.known_hosts` names a known_hosts file, and accept-new appends one well-formed
  `HOST KEYTYPE BASE64` line to a file that holds only known_hosts lines; never to
  authorized_keys, a shell rc file, a FIFO, or through a symlink swapped in.
"""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path
from typing import Any

import paramiko
import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from provision.inventory import load_inventory
from provision.render import render_ssh_config
from provision.ssh.errors import HostKeyError
from provision.ssh.hostkeys import KnownHosts, known_hosts_line
from tests.support.tools import need_tools


def write_inventory(tmp_path: Path, **doc: Any) -> Path:
    base: dict[str, Any] = {
        "version": 1, "defaults": {"user": "ubuntu"},
        "bastions": {"jump": {"address": "jump.example.org", "allow_ssh_from": ["203.0.113.0/24"]}},
        "hosts": {"gpu1": {"address": "10.0.1.21", "via": "jump", "ssh_from": ["10.0.0.0/16"],
                           "services": {"jupyter": {}}}},
    }
    for k, v in doc.items():
        base[k] = {**base.get(k, {}), **v}
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(base, sort_keys=False))
    return path


# --- node names that would capture the operator's connections -----------------------------------

@pytest.mark.parametrize("name", ["github.com", "gpu1.example.org", "10.0.0.1", "127",
                                  "0x7f000001", "localhost", "LOCALHOST"])
@pytest.mark.parametrize("kind", ["hosts", "bastions"])
def test_a_node_named_like_a_domain_or_an_address_is_refused(tmp_path: Path, name: str,
                                                            kind: str) -> None:
    doc = {"address": "10.0.1.99"} if kind == "hosts" else {"address": "203.0.113.9"}
    path = write_inventory(tmp_path, **{kind: {name: doc}})
    r = CliRunner().invoke(main, ["check", "-i", str(path)])
    assert r.exit_code == 2, r.output
    assert f"{path}:" in r.stderr and f"{kind}.{name}" in r.stderr
    assert "domain" in r.stderr or "address" in r.stderr


@pytest.mark.parametrize("name", ["gpu1", "gpu-a100-01", "node_7", "x1", "a"])
def test_single_label_names_stay_allowed(tmp_path: Path, name: str) -> None:
    path = write_inventory(tmp_path, hosts={name: {"address": "10.0.1.99"}})
    assert any(h.name == name for h in load_inventory(str(path)).hosts)


# --- ssh -G: names outside the inventory behave as before -----------------------------------------


def test_the_rendered_config_names_only_inventory_nodes(tmp_path: Path) -> None:
    """No `Host *`, no `Match`, no pattern characters: every Host line is a list of nodes."""
    inv = load_inventory(str(write_inventory(tmp_path, hosts={"gpu2": {"address": "10.0.1.22"}})))
    nodes = {n.name for n in (*inv.hosts, *inv.bastions)}
    text = render_ssh_config(inv)
    for line in text.splitlines():
        words = line.split()
        if words and words[0].lower() in ("host", "match"):
            assert words[0] == "Host" and set(words[1:]) <= nodes, line


# --- known_hosts: the only file provision appends to ----------------------------------------------

@pytest.mark.parametrize("path", ["~/.ssh/authorized_keys", "~/.bashrc", "~/.ssh/id_ed25519",
                                  "~/.ssh/config", "/etc/ssh/sshd_config", "~/.ssh/"])
def test_known_hosts_must_name_a_known_hosts_file(tmp_path: Path, path: str) -> None:
    r = CliRunner().invoke(main, ["check", "-i", str(write_inventory(tmp_path, defaults={"known_hosts": path}))])
    assert r.exit_code == 2, r.output
    assert "defaults.known_hosts" in r.stderr and "not a known_hosts file" in r.stderr


@pytest.mark.parametrize("path", ["~/.ssh/known_hosts", "~/.ssh/known_hosts2",
                                  "~/.ssh/fleet_known_hosts", "/srv/lab/known_hosts.lab"])
def test_known_hosts_names_that_are_allowed(tmp_path: Path, path: str) -> None:
    inv = load_inventory(str(write_inventory(tmp_path, defaults={"known_hosts": path})))
    assert inv.known_hosts == path


def key(tmp_path: Path) -> paramiko.PKey:
    need_tools("ssh-keygen")
    p = tmp_path / f"k{len(list(tmp_path.glob('k*')))}"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(p)], check=True)
    return paramiko.Ed25519Key.from_private_key_file(str(p))


def test_never_reads_or_appends_to_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "known_hosts"
    os.mkfifo(fifo)
    with pytest.raises(HostKeyError, match="not a regular file"):
        KnownHosts(fifo, accept_new=True).check("gpu1", "10.0.0.1", 22, key(tmp_path))


@pytest.mark.parametrize("name", ["@cert-authority *", "*", "10.0.0.1,evil", "a b", "10.0.0.1\nx",
                                  "[10.0.0.1]:99999", "|1|x|y", "!10.0.0.1", "[::1]:22 x"])
def test_the_appended_line_has_the_validated_address_only(name: str) -> None:
    b64 = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + b"\x00" * 36).decode()
    with pytest.raises(HostKeyError):
        known_hosts_line(name, "ssh-ed25519", b64)
    assert known_hosts_line("[10.0.0.1]:2222", "ssh-ed25519", b64) == f"[10.0.0.1]:2222 ssh-ed25519 {b64}\n"
    assert known_hosts_line("gpu1.example.org", "ssh-ed25519", b64).startswith("gpu1.example.org ")


def test_the_appended_key_type_must_match_its_blob() -> None:
    b64 = base64.b64encode(b"\x00\x00\x00\x07ssh-rsa" + b"\x00" * 20).decode()
    with pytest.raises(HostKeyError):
        known_hosts_line("10.0.0.1", "ssh-ed25519", b64)
    with pytest.raises(HostKeyError):
        known_hosts_line("10.0.0.1", "ssh-dss", b64)
