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
from provision.commands.render import INCLUDE_LINE, install
from provision.inventory import load_inventory
from provision.render import render_ssh_config
from provision.ssh.errors import HostKeyError
from provision.ssh.hostkeys import KnownHosts, known_hosts_line, not_known_hosts
from tests.support.tools import need_tools, ssh_g


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

OPERATOR_CONFIG = """\
Host github.com
  User git
  IdentityFile ~/.ssh/github_key
Host *.corp.example
  ProxyJump corp-bastion
Host *
  ServerAliveInterval 60
  ForwardAgent yes
"""

NOT_NODES = ["github.com", "gitlab.com", "10.0.1.21", "jump.example.org", "203.0.113.10",
             "localhost", "gpu1.example.org", "gpu10", "gpu", "db.corp.example", "jump1"]


def test_installed_config_changes_ssh_only_for_the_inventory_nodes(tmp_path: Path) -> None:
    need_tools("ssh")
    inv = load_inventory(str(write_inventory(tmp_path)))
    ssh_dir = tmp_path / "home" / ".ssh"
    ssh_dir.mkdir(parents=True)
    (ssh_dir / "config").write_text(OPERATOR_CONFIG)
    before = {n: ssh_g(ssh_dir / "config", n) for n in [*NOT_NODES, "gpu1", "jump"]}
    install(render_ssh_config(inv), ssh_dir)
    installed = (ssh_dir / "config").read_text()
    assert installed.startswith(INCLUDE_LINE + "\n")  # at the top: where it wins for its names
    # ssh resolves a relative Include against the invoking user's own ~/.ssh (getpwuid, not
    # $HOME): point it at this test's directory, the line and its place unchanged
    (ssh_dir / "config").write_text(installed.replace(INCLUDE_LINE, f"Include {ssh_dir}/config.d/*.conf", 1))
    for name in NOT_NODES:
        assert ssh_g(ssh_dir / "config", name) == before[name], f"`ssh {name}` changed"
    # the positive control: the nodes themselves do change (so the Include is really read)
    gpu1 = ssh_g(ssh_dir / "config", "gpu1")
    assert "hostname 10.0.1.21" in gpu1 and gpu1 != before["gpu1"]
    assert "proxyjump jump" in gpu1 and "forwardagent no" in gpu1
    assert "hostname jump.example.org" in ssh_g(ssh_dir / "config", "jump")


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


def test_accept_new_appends_one_well_formed_line(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    salt = base64.b64encode(b"s" * 20).decode()
    kh.write_text(f"# mine\n|1|{salt}|{salt} ssh-ed25519 " + key(tmp_path).get_base64())  # no final newline
    k = key(tmp_path)
    KnownHosts(kh, accept_new=True).check("gpu1", "10.0.0.1", 2222, k)
    lines = kh.read_text().split("\n")
    assert lines[-1] == "" and lines[-2] == f"[10.0.0.1]:2222 ssh-ed25519 {k.get_base64()}"
    assert not_known_hosts(kh.read_text()) is None


def test_a_malformed_hashed_entry_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("|1|c2FsdA==|aGFzaA== ssh-ed25519 " + key(tmp_path).get_base64() + "\n")
    with pytest.raises(HostKeyError, match="malformed hashed entry"):
        KnownHosts(kh, accept_new=True).check("gpu1", "10.0.0.1", 22, key(tmp_path))


def test_a_new_known_hosts_file_is_created_private(tmp_path: Path) -> None:
    kh = tmp_path / "new" / "known_hosts"
    KnownHosts(kh, accept_new=True).check("gpu1", "10.0.0.1", 22, key(tmp_path))
    assert kh.stat().st_mode & 0o777 == 0o600


AUTHORIZED_KEYS = 'command="/bin/sh -c id" ssh-ed25519 {b64} alice@laptop\n'
BASHRC = "export PATH=$HOME/bin:$PATH\nalias ll='ls -l'\n"


@pytest.mark.parametrize("content", [AUTHORIZED_KEYS, "ssh-ed25519 {b64} alice@laptop\n", BASHRC,
                                     "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA==\n",
                                     "gpu1 ssh-ed25519 AAAAnotbase64!\n"],
                         ids=["authorized_keys-options", "authorized_keys", "bashrc",
                              "private-key", "bad-blob"])
def test_never_appends_to_something_that_is_not_known_hosts(tmp_path: Path, content: str) -> None:
    f = tmp_path / "known_hosts"
    f.write_text(content.format(b64=key(tmp_path).get_base64()))
    before = f.read_bytes()
    with pytest.raises(HostKeyError, match="not a known_hosts entry"):
        KnownHosts(f, accept_new=True).check("gpu1", "10.0.0.1", 22, key(tmp_path))
    assert f.read_bytes() == before


def test_never_reads_or_appends_to_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "known_hosts"
    os.mkfifo(fifo)
    with pytest.raises(HostKeyError, match="not a regular file"):
        KnownHosts(fifo, accept_new=True).check("gpu1", "10.0.0.1", 22, key(tmp_path))


def test_a_dotfile_symlink_is_followed_to_a_real_known_hosts(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "known_hosts"
    real.parent.mkdir()
    real.write_text("")
    link = tmp_path / "known_hosts"
    link.symlink_to(real)
    k = key(tmp_path)
    KnownHosts(link, accept_new=True).check("gpu1", "10.0.0.1", 22, k)
    assert link.is_symlink() and real.read_text() == f"10.0.0.1 ssh-ed25519 {k.get_base64()}\n"
    bashrc = tmp_path / ".bashrc"
    bashrc.write_text(BASHRC)
    link.unlink()
    link.symlink_to(bashrc)  # a symlink to a shell file is refused by content
    with pytest.raises(HostKeyError):
        KnownHosts(link, accept_new=True).check("gpu2", "10.0.0.2", 22, key(tmp_path))
    assert bashrc.read_text() == BASHRC


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


def test_ssh_reads_what_was_appended(tmp_path: Path) -> None:
    """OpenSSH itself finds the appended line (ssh-keygen -F)."""
    need_tools("ssh-keygen")
    kh = tmp_path / "known_hosts"
    k = key(tmp_path)
    KnownHosts(kh, accept_new=True).check("gpu1", "10.0.0.1", 2222, k)
    out = subprocess.run(["ssh-keygen", "-F", "[10.0.0.1]:2222", "-f", str(kh)],
                         capture_output=True, text=True, check=True).stdout
    assert k.get_base64() in out
