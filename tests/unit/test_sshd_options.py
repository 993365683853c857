"""The inventory's `sshd:` (issue 38): host over role, what lands in the drop-in, and the
read-back of options `sshd -T` prints one line per name. Pure."""

from __future__ import annotations

from pathlib import Path

import yaml

from provision.facts.sshd_config import SshdConfig
from provision.facts.sshd_effective import SshdEffective, settings_of
from provision.inventory import load_inventory
from provision.inventory import sshd_options as so
from provision.render import render_host
from provision.steps import sshd_effect as E

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBNrAxpAm3PHPEOLnlZSVMhiQ8nLQP/kB8wiOhNp3a9X alice@lab"


def _inventory(tmp_path: Path) -> Path:
    doc = {"version": 1, "defaults": {"user": "ubuntu"},
           "bastions": {"jump": {"address": "10.0.0.5", "allow_ssh_from": ["10.9.0.0/24"],
                                 "sshd": {"PermitOpen": ["10.0.1.21:22", "10.0.1.22:*"]}}},
           "roles": {"edit": {"sshd": {"AllowTcpForwarding": "local", "MaxSessions": 5,
                                       "ClientAliveInterval": 120}},
                     "later": {"sshd": {"MaxSessions": 6}}},
           "team": {"alice": {"keys": [KEY]}},
           "hosts": {"gpu1": {"address": "10.0.1.21", "via": "jump", "roles": ["edit", "later"],
                              "sshd": {"ClientAliveInterval": 300,
                                       "AllowUsers": ["ubuntu", "alice"]}},
                     "gpu2": {"address": "10.0.1.22", "via": "jump"}}}
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _dropin(inv: object, name: str) -> str:
    (a,) = [a for a in render_host(inv, inv.node(name)) if a.kind == "sshd"]  # type: ignore[attr-defined]
    assert a.mode == 0o600
    return str(a.content)


def test_a_host_wins_over_its_roles_and_a_later_role_over_an_earlier(tmp_path: Path) -> None:
    inv = load_inventory(_inventory(tmp_path))
    assert dict(inv.node("gpu1").sshd) == {"AllowTcpForwarding": "local", "MaxSessions": "6",
                                          "ClientAliveInterval": "300",
                                          "AllowUsers": "ubuntu alice"}
    assert inv.node("gpu2").sshd == ()
    assert dict(inv.node("jump").sshd) == {"PermitOpen": "10.0.1.21:22 10.0.1.22:*"}


def test_the_drop_in_carries_the_choices_and_the_tightened_defaults(tmp_path: Path) -> None:
    inv = load_inventory(_inventory(tmp_path))
    gpu1 = _dropin(inv, "gpu1").splitlines()
    for line in ("AllowTcpForwarding local", "MaxSessions 6", "ClientAliveInterval 300",
                 "ClientAliveCountMax 2", "AllowUsers ubuntu alice", "TCPKeepAlive no",
                 "Compression no", "PasswordAuthentication no", "X11Forwarding no"):
        assert gpu1.count(line) == 1, line
    assert "# the inventory's sshd.AllowTcpForwarding" in gpu1
    gpu2 = _dropin(inv, "gpu2").splitlines()
    # no tunnel service, nothing in the inventory: forwarding stays off, the defaults hold
    for line in ("AllowTcpForwarding no", "MaxSessions 4", "ClientAliveInterval 60"):
        assert line in gpu2, line
    assert not any(x.startswith(("AllowUsers", "AllowGroups", "PermitOpen")) for x in gpu2)
    assert "PermitOpen 10.0.1.21:22 10.0.1.22:*" in _dropin(inv, "jump").splitlines()


def _eff(lines: list[str]) -> SshdEffective:
    return SshdEffective(settings_of(lines), 0)


def test_a_list_sshd_prints_one_line_per_name_reads_back_as_written() -> None:
    want = E.hardened("AllowUsers ubuntu alice\nAllowGroups ops\nMaxSessions 3\n")
    same = _eff(["allowusers ubuntu", "allowusers alice", "allowgroups ops", "maxsessions 3"])
    assert E.compare(want, same, SshdConfig(), "/x") == []
    # another file adding a name, or a value sshd does not run with, is a difference
    more = _eff(["allowusers ubuntu", "allowusers alice", "allowusers carol",
                 "allowgroups ops", "maxsessions 10"])
    got = {(m.key, m.have) for m in E.compare(want, more, SshdConfig(), "/x")}
    assert got == {("allowusers", "ubuntu alice carol"), ("maxsessions", "10")}


def test_permit_open_admits_wildcard_ports_and_names_what_it_cuts() -> None:
    opts = (("PermitOpen", "10.0.1.21:22 [fd00::7]:*"),)
    assert so.permit_open_problem(opts, {"gpu1": "10.0.1.21:22", "gpu6": "[fd00::7]:2222"}) is None
    why = so.permit_open_problem(opts, {"gpu2": "10.0.1.21:2222"})
    assert why is not None and "gpu2 (10.0.1.21:2222)" in why
    assert so.permit_open_problem((("PermitOpen", "any"),), {"gpu2": "x:1"}) is None
    assert so.target("fd00::7", 22) == "[fd00::7]:22"
