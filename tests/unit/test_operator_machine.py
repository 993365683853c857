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


# --- the second guard, at write time (issue 34, class 10) ---------------------------------------
#
# The name check at load sees the path as written. These call the writer itself with a path
# that passes it (its name contains 'known_hosts') but that leads to a file of another role.
# Every target is empty, so the content check (every line a known_hosts entry) passes:
# before, each of these got the host key appended.

PUBLIC = paramiko.Ed25519Key(data=b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + bytes(32))
LINE = f"10.0.0.1 ssh-ed25519 {PUBLIC.get_base64()}\n"


def _ssh_dir(tmp_path: Path) -> Path:
    d = tmp_path / "home" / ".ssh"
    d.mkdir(parents=True, mode=0o700)
    return d


@pytest.mark.parametrize("target", ["authorized_keys", "authorized_keys2", "../.bashrc",
                                    "../.profile", "id_ed25519", "id_ed25519.pub",
                                    "authorized_keys_known_hosts", "known_hosts.pub",
                                    "known_hosts.bashrc"])
def test_a_known_hosts_name_that_leads_to_another_file_is_not_appended_to(
        tmp_path: Path, target: str) -> None:
    from provision.ssh.hostkeys import append_line

    ssh = _ssh_dir(tmp_path)
    real = (ssh / target).resolve()
    real.write_text("")
    link = ssh / "fleet_known_hosts"
    link.symlink_to(real)
    with pytest.raises(HostKeyError, match=r"refusing to append a host key to .*fleet_known_hosts: "
                                           r"its real path"):
        append_line(link, LINE)
    assert real.read_text() == ""
    if "known_hosts" not in target:  # the writer called with the file itself
        with pytest.raises(HostKeyError, match="not named like a known_hosts file"):
            append_line(real, LINE)
        assert real.read_text() == ""


def test_an_empty_authorized_keys_through_accept_new_stays_empty(tmp_path: Path) -> None:
    """The whole path accept-new takes (KnownHosts.check), through a symlink named like a
    known_hosts file."""
    ssh = _ssh_dir(tmp_path)
    (ssh / "authorized_keys").write_text("")
    (ssh / "known_hosts").symlink_to(ssh / "authorized_keys")
    with pytest.raises(HostKeyError, match="authorized_keys"):
        KnownHosts(ssh / "known_hosts", accept_new=True).check("gpu1", "10.0.0.1", 22, PUBLIC)
    assert (ssh / "authorized_keys").read_text() == ""


def test_a_hard_link_to_authorized_keys_is_not_appended_to(tmp_path: Path) -> None:
    from provision.ssh.hostkeys import append_line

    ssh = _ssh_dir(tmp_path)
    (ssh / "authorized_keys").write_text("")
    os.link(ssh / "authorized_keys", ssh / "fleet_known_hosts")  # every name check passes
    with pytest.raises(HostKeyError, match="has 2 hard links"):
        append_line(ssh / "fleet_known_hosts", LINE)
    assert (ssh / "authorized_keys").read_text() == ""


def test_an_executable_or_someone_elses_file_is_not_appended_to(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.ssh.hostkeys import append_line

    kh = _ssh_dir(tmp_path) / "known_hosts"
    kh.write_text("")
    kh.chmod(0o700)
    with pytest.raises(HostKeyError, match="is executable"):
        append_line(kh, LINE)
    kh.chmod(0o600)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)  # the file is not "yours"
    with pytest.raises(HostKeyError, match=f"is owned by uid {os.getuid()}, not by you"):
        append_line(kh, LINE)
    monkeypatch.undo()
    assert kh.read_text() == ""
    append_line(kh, LINE)  # the control: the same file, as it should be, is appended to
    assert kh.read_text() == LINE


@pytest.mark.parametrize("name", ["known_hosts", "known_hosts2", "fleet_known_hosts",
                                  "known_hosts.lab", "new/known_hosts"])
def test_known_hosts_files_are_still_appended_to(tmp_path: Path, name: str) -> None:
    from provision.ssh.hostkeys import append_line

    kh = _ssh_dir(tmp_path) / name
    append_line(kh, LINE)
    append_line(kh, LINE)
    assert kh.read_text() == LINE * 2
