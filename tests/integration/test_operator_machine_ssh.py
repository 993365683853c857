"""The operator's machine with the real ssh client: the installed config changes ssh only for
the inventory's nodes, and what accept-new appends to known_hosts is what ssh reads."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from provision.commands.render import INCLUDE_LINE, install
from provision.inventory import load_inventory
from provision.render import render_ssh_config
from provision.ssh.errors import HostKeyError
from provision.ssh.hostkeys import KnownHosts, not_known_hosts
from tests.support.tools import need_tools, ssh_g
from tests.unit.test_operator_machine import key, write_inventory

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


# --- known_hosts: the only file provision appends to ----------------------------------------------


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


def test_ssh_reads_what_was_appended(tmp_path: Path) -> None:
    """OpenSSH itself finds the appended line (ssh-keygen -F)."""
    need_tools("ssh-keygen")
    kh = tmp_path / "known_hosts"
    k = key(tmp_path)
    KnownHosts(kh, accept_new=True).check("gpu1", "10.0.0.1", 2222, k)
    out = subprocess.run(["ssh-keygen", "-F", "[10.0.0.1]:2222", "-f", str(kh)],
                         capture_output=True, text=True, check=True).stdout
    assert k.get_base64() in out
