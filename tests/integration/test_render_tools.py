"""The rendered files, read by the real programs that will consume them.

OpenSSH's client (`ssh -G`), sshd (`sshd -t`), iptables-restore/ip6tables-restore inside a
throwaway network namespace, and `systemd-analyze verify`. A missing program or missing
root skips with the reason; under CI=true a missing prerequisite fails instead.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from provision.inventory import load_inventory
from provision.inventory.model import Inventory
from provision.render import write_tree
from tests.support.tools import in_netns as _in
from tests.support.tools import need, need_root, need_tools, run, ssh_g
from tests.support.tools import netns as netns  # the fixture
from tests.support.tools import verify as _verify

FIXTURE = Path(__file__).parent.parent / "fixtures" / "example.yml"


@pytest.fixture(scope="module")
def inv() -> Inventory:
    return load_inventory(FIXTURE)


@pytest.fixture(scope="module")
def tree(inv: Inventory, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("render")
    write_tree(inv, out)
    return out


# --- ssh_config -------------------------------------------------------------------------------

def test_openssh_reads_the_ssh_config(tree: Path) -> None:
    need_tools("ssh")
    gpu1 = ssh_g(tree / "ssh_config", "gpu1")
    assert "proxyjump jump" in gpu1
    assert "hostname 10.0.1.21" in gpu1
    forwards = sorted(ln for ln in gpu1 if ln.startswith("localforward "))
    assert forwards == ["localforward [127.0.0.1]:6006 [127.0.0.1]:6006",
                        "localforward [127.0.0.1]:8888 [127.0.0.1]:8888"]
    for line in ("exitonforwardfailure yes", "forwardagent no", "stricthostkeychecking true",
                 "serveraliveinterval 15", "serveralivecountmax 3", "identitiesonly yes"):
        assert line in gpu1
    jump = ssh_g(tree / "ssh_config", "jump")
    assert not any(ln.startswith("proxyjump") for ln in jump)
    assert not any(ln.startswith("localforward") for ln in jump)
    # the defaults block must not leak to hosts the inventory does not name
    other = ssh_g(tree / "ssh_config", "unrelated.example.org")
    assert "serveraliveinterval 0" in other
    assert "stricthostkeychecking true" not in other


# --- iptables, inside a throwaway network namespace ---------------------------------------------

@pytest.mark.parametrize("node", ["jump", "gpu1", "gpu2"])
def test_rules_pass_iptables_restore_test(tree: Path, netns: str, node: str) -> None:
    d = tree / node / "etc" / "iptables"
    for tool, name in (("iptables-restore", "rules.v4"), ("ip6tables-restore", "rules.v6"),
                       ("iptables-restore", "provision-docker.v4"),
                       ("ip6tables-restore", "provision-docker.v6")):
        _in(netns, tool, "--test", str(d / name))
        _in(netns, tool, "--test", "--noflush", str(d / name))


def test_firewall_script_is_idempotent_and_leaves_foreign_chains(tree: Path, netns: str) -> None:
    script = tree / "gpu1" / "usr" / "local" / "sbin" / "provision-firewall"
    rules = tree / "gpu1" / "etc" / "iptables"
    # What Docker and another tool left behind before we arrive.
    for cmd in (["iptables", "-N", "DOCKER"], ["iptables", "-A", "DOCKER", "-j", "RETURN"],
                ["iptables", "-N", "DOCKER-USER"], ["iptables", "-A", "FORWARD", "-j", "DOCKER-USER"],
                ["iptables", "-A", "DOCKER-USER", "-j", "RETURN"],
                ["iptables", "-A", "INPUT", "-s", "192.0.2.1", "-j", "ACCEPT"],
                ["iptables", "-t", "nat", "-N", "DOCKER"]):
        _in(netns, *cmd)
    before = _in(netns, "iptables-save").stdout
    for _ in range(2):
        _in(netns, "sh", str(script), str(rules))
    v4 = [ln for ln in _in(netns, "iptables-save").stdout.splitlines() if not ln.startswith("#")]
    v6 = [ln for ln in _in(netns, "ip6tables-save").stdout.splitlines() if not ln.startswith("#")]
    assert v4.count("-A INPUT -j PROVISION-INPUT") == 1
    assert v4.index("-A INPUT -j PROVISION-INPUT") < v4.index("-A INPUT -s 192.0.2.1/32 -j ACCEPT")
    assert v4.count("-A DOCKER-USER -j PROVISION-DOCKER") == 1
    for line in ("-A DOCKER -j RETURN", "-A FORWARD -j DOCKER-USER", "-A DOCKER-USER -j RETURN",
                 ":DOCKER - [0:0]"):
        assert line in v4, line
    assert "*nat" in before and "*nat" in "\n".join(v4)
    assert v6.count("-A INPUT -j PROVISION-INPUT") == 1
    assert not any("DOCKER" in ln for ln in v6)  # no DOCKER-USER in v6 here: snippet not loaded
    ours = [ln for ln in v4 if ln.startswith("-A PROVISION-INPUT")]
    assert ours[-1].endswith("-j DROP") and "--dport 22" in "\n".join(ours)


# --- sshd ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("node", ["jump", "gpu1", "gpu2"])
def test_sshd_accepts_the_dropin(tree: Path, tmp_path: Path, node: str) -> None:
    need_tools("ssh-keygen")
    sshd = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").exists() else None)
    need(sshd is not None, "sshd not installed")
    assert sshd is not None
    privsep = Path("/run/sshd")  # sshd -t insists on its privilege separation directory
    if not privsep.is_dir():
        need_root()
        privsep.mkdir(mode=0o755, parents=True, exist_ok=True)
    key = tmp_path / "host_ed25519"
    run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
    dropin = tree / node / "etc" / "ssh" / "sshd_config.d" / "00-provision.conf"
    config = tmp_path / "sshd_config"
    # Like Debian's: the drop-ins first, then the distribution's own (weaker) settings.
    config.write_text(f"Include {dropin}\nKbdInteractiveAuthentication yes\nX11Forwarding yes\n"
                      "UsePAM yes\n")
    run(sshd, "-t", "-f", str(config), "-o", f"HostKey={key}")
    effective = run(sshd, "-T", "-f", str(config), "-o", f"HostKey={key}",
                    "-C", "user=ubuntu,host=laptop,addr=127.0.0.1").stdout.splitlines()
    assert "x11forwarding no" in effective  # the drop-in's value won
    assert "kbdinteractiveauthentication no" in effective
    assert "passwordauthentication no" in effective
    assert "allowtcpforwarding local" in effective
    assert any(ln.startswith("kexalgorithms ") and "curve25519-sha256" in ln for ln in effective)


# --- systemd ------------------------------------------------------------------------------------

def test_service_units_verify(tmp_path: Path) -> None:
    """Units whose ExecStart points at programs that exist here (this venv's)."""
    need_tools("systemd-analyze")
    venv = Path(sys.prefix)
    need((venv / "bin" / "jupyter").exists() and (venv / "bin" / "tensorboard").exists(),
         f"jupyter and tensorboard are not installed in {venv}")
    doc = tmp_path / "inv.yml"
    doc.write_text(
        "version: 1\n"
        "hosts:\n  box:\n    address: 10.0.0.5\n    ssh_from: [10.0.0.0/8]\n    services:\n"
        f"      jupyter: {{venv: {venv}}}\n"
        f"      tensorboard: {{venv: {venv}, logdir: /srv/runs}}\n"
        f"      web: {{port: 8000, venv: {venv}, command: '{{venv}}python -m http.server"
        " --bind {bind} {port}'}\n")
    out = tmp_path / "out"
    write_tree(load_inventory(doc), out)
    units = sorted((out / "box" / "etc" / "systemd" / "system").glob("provision-*.service"))
    services = [u for u in units if u.name != "provision-firewall.service"]
    assert [u.name for u in services] == ["provision-jupyter.service", "provision-tensorboard.service",
                                          "provision-web.service"]
    _verify(*map(str, services))


def test_firewall_unit_verifies_against_the_rendered_tree(tree: Path) -> None:
    """--root: the unit's ExecStart (the rendered script) is looked up inside the tree."""
    need_tools("systemd-analyze")
    _verify(f"--root={tree / 'gpu1'}", "provision-firewall.service")


def test_verify_catches_a_broken_unit(tmp_path: Path) -> None:
    """The check above is not vacuous: a unit with a bad key and a missing program fails."""
    need_tools("systemd-analyze")
    unit = tmp_path / "broken.service"
    unit.write_text("[Service]\nExecStart=/nonexistent/prog\nBogusKey=1\n")
    with pytest.raises(AssertionError):
        _verify(str(unit))
