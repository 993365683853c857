"""Rendering: golden files for every artifact, text-level safety properties, the commands.

Regenerate the golden files after an intended change with:
    UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_render.py
and review the diff before committing it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from traitlets.config import Config

from provision.cli import main
from provision.commands.render import INCLUDE_LINE, has_include, install, with_include
from provision.inventory import InventoryError, load_inventory
from provision.inventory.model import Inventory
from provision.render import (
    Artifact,
    RenderError,
    exec_start,
    render_host,
    render_ssh_config,
    write_tree,
)

TESTS = Path(__file__).parent.parent
FIXTURE = TESTS / "fixtures" / "example.yml"
GOLDEN = TESTS / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="module")
def inv() -> Inventory:
    return load_inventory(FIXTURE)


def _all_artifacts(inv: Inventory) -> list[tuple[str, Artifact]]:
    return [(n.name, a) for n in (*inv.bastions, *inv.hosts) for a in render_host(inv, n)]


# --- golden files ---------------------------------------------------------------------------

def _rendered_tree(inv: Inventory) -> dict[str, str]:
    files = {"ssh_config": render_ssh_config(inv),
             "ssh_config.alice": render_ssh_config(inv, user="alice")}
    for node, a in _all_artifacts(inv):
        files[f"{node}{a.path}"] = a.content
    return files


@pytest.mark.parametrize("name", ["example", "hostile"])
def test_golden_files(name: str) -> None:
    base = GOLDEN / name
    rendered = _rendered_tree(load_inventory(TESTS / "fixtures" / f"{name}.yml"))
    if UPDATE:
        shutil.rmtree(base, ignore_errors=True)
        for rel, content in rendered.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(content, encoding="utf-8")
    on_disk = {str(p.relative_to(base)) for p in base.rglob("*") if p.is_file()}
    assert on_disk == set(rendered), "golden file set differs (UPDATE_GOLDEN=1 to regenerate)"
    for rel, content in rendered.items():
        assert (base / rel).read_text(encoding="utf-8") == content, (
            f"{rel} differs from tests/golden/{name}/{rel} (UPDATE_GOLDEN=1 to regenerate)")


def test_rendering_is_deterministic(inv: Inventory) -> None:
    again = load_inventory(FIXTURE)
    assert _rendered_tree(inv) == _rendered_tree(again)


def test_write_tree_mirrors_remote_paths(inv: Inventory, tmp_path: Path) -> None:
    written = write_tree(inv, tmp_path)
    assert written == sorted(written)
    assert tmp_path / "ssh_config" in written
    rules = tmp_path / "gpu1" / "etc" / "iptables" / "rules.v4"
    assert rules in written
    script = tmp_path / "gpu1" / "usr" / "local" / "sbin" / "provision-firewall"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    for node, a in _all_artifacts(inv):
        assert (tmp_path / node / a.path.lstrip("/")).read_text() == a.content


def test_write_tree_writes_nothing_when_rendering_fails(tmp_path: Path) -> None:
    doc = tmp_path / "inv.yml"
    doc.write_text("version: 1\nhosts:\n  lonely: {address: 10.9.9.9}\n")
    with pytest.raises(RenderError):
        write_tree(load_inventory(doc), tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --- text-level properties ----------------------------------------------------------------------

def test_artifact_kinds_paths_and_services(inv: Inventory) -> None:
    by_path = {a.path: a for a in render_host(inv, inv.node("gpu1"))}
    expect = {
        "/etc/ssh/sshd_config.d/00-provision.conf": ("sshd", "ssh.service"),
        "/etc/iptables/rules.v4": ("iptables-v4", "provision-firewall.service"),
        "/etc/iptables/rules.v6": ("iptables-v6", "provision-firewall.service"),
        "/etc/iptables/provision-docker.v4": ("iptables-docker-v4", "provision-firewall.service"),
        "/etc/iptables/provision-docker.v6": ("iptables-docker-v6", "provision-firewall.service"),
        "/etc/systemd/system/provision-jupyter.service": ("unit", "provision-jupyter.service"),
        "/etc/systemd/system/provision-tensorboard.service": ("unit", "provision-tensorboard.service"),
        "/etc/systemd/system/provision-model-api.service": ("unit", "provision-model-api.service"),
        "/etc/provision/jupyter/jupyter/jupyter_server_config.py": ("jupyter-config", "provision-jupyter.service"),
    }
    for path, (kind, service) in expect.items():
        assert (by_path[path].kind, by_path[path].service) == (kind, service), path
    bastion = {a.path for a in render_host(inv, inv.node("jump"))}
    assert {"/etc/ssh/sshd_config.d/00-provision.conf", "/etc/iptables/rules.v4",
            "/etc/iptables/rules.v6"} <= bastion
    assert not any(p.endswith(".service") and "provision-jupyter" in p for p in bastion)


def test_iptables_files_touch_only_our_chains(inv: Inventory) -> None:
    for node, a in _all_artifacts(inv):
        if not a.kind.startswith("iptables"):
            continue
        lines = [ln for ln in a.content.splitlines() if ln and not ln.startswith("#")]
        assert lines[0] == "*filter" and lines[-1] == "COMMIT", (node, a.path)
        assert not any(ln.startswith("*") and ln != "*filter" for ln in lines)  # no *nat etc.
        ours = "PROVISION-DOCKER" if "docker" in a.kind else "PROVISION-INPUT"
        assert [ln for ln in lines if ln.startswith(":")] == [f":{ours} - [0:0]"]
        for ln in lines[1:-1]:
            if ln.startswith(("-A ", "-F ", "-I ", "-D ", "-X ", "-P ", "-Z ", "-N ")):
                assert ln.split()[:2] in (["-A", ours], ["-F", ours]), (node, a.path, ln)
        assert "DOCKER-USER" not in "\n".join(lines)
        assert not re.search(r"^-A (INPUT|FORWARD|OUTPUT|DOCKER)\b", a.content, re.M)


def test_sshd_dropin_settings(inv: Inventory) -> None:
    def settings(node: str) -> dict[str, str]:
        a = next(a for a in render_host(inv, inv.node(node)) if a.kind == "sshd")
        pairs = [ln.split(" ", 1) for ln in a.content.splitlines() if ln and not ln.startswith("#")]
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), "an option appears twice"
        return dict(pairs)

    gpu1, gpu_plain, jump = settings("gpu1"), None, settings("jump")
    assert gpu1["PasswordAuthentication"] == "no"
    assert gpu1["PermitRootLogin"] == "prohibit-password"
    assert gpu1["AllowTcpForwarding"] == "local" == jump["AllowTcpForwarding"]
    assert "curve25519-sha256" in gpu1["KexAlgorithms"].split(",")
    assert "sntrup761x25519-sha512@openssh.com" in gpu1["KexAlgorithms"].split(",")
    assert {"aes128-ctr", "aes256-gcm@openssh.com"} <= set(gpu1["Ciphers"].split(","))
    assert "ssh-rsa" not in gpu1["PubkeyAcceptedAlgorithms"].split(",")
    # bob's ecdsa key must keep working
    assert "ecdsa-sha2-nistp256" in gpu1["PubkeyAcceptedAlgorithms"].split(",")
    assert gpu_plain is None


def test_forwarding_off_without_tunnels(tmp_path: Path) -> None:
    doc = tmp_path / "inv.yml"
    doc.write_text("version: 1\nhosts:\n  box:\n    address: 10.0.0.5\n    ssh_from: [10.0.0.0/8]\n"
                   "    services:\n      api: {port: 8000, expose: none, command: /bin/true}\n")
    inv = load_inventory(doc)
    a = next(a for a in render_host(inv, inv.node("box")) if a.kind == "sshd")
    assert "AllowTcpForwarding no\n" in a.content


def test_ssh_config_blocks(inv: Inventory) -> None:
    text = render_ssh_config(inv)
    assert not re.search(r"^Host .*\*", text, re.M)
    blocks = re.split(r"\n(?=Host )", text)
    gpu1 = next(b for b in blocks if b.startswith("Host gpu1\n"))
    assert "  ProxyJump jump\n" in gpu1
    assert "  LocalForward 127.0.0.1:8888 127.0.0.1:8888\n" in gpu1
    assert "  LocalForward 127.0.0.1:6006 127.0.0.1:6006\n" in gpu1
    assert "8000" not in gpu1  # public service, not tunnelled
    assert blocks[-1].startswith("Host jump gpu1 gpu2\n")
    assert "UserKnownHostsFile ~/.ssh/known_hosts.provision" in blocks[-1]
    alice = render_ssh_config(inv, user="alice")
    assert "  User ubuntu" not in alice and alice.count("  User alice\n") == 3
    assert alice.count("  IdentityFile ~/.ssh/alice_ed25519\n") == 3
    bob = render_ssh_config(inv, user="bob", identity_file="~/.ssh/bob_key")
    assert bob.count("  IdentityFile ~/.ssh/bob_key\n") == 3
    assert "UserKnownHostsFile /x/kh" in render_ssh_config(inv, known_hosts="/x/kh")


def test_ssh_config_chains_and_ipv6_forwards(tmp_path: Path) -> None:
    doc = tmp_path / "inv.yml"
    doc.write_text(
        "version: 1\n"
        "bastions:\n  outer: {address: 192.0.2.1}\n"
        "  inner: {address: 10.0.0.1, via: outer}\n"
        "hosts:\n  deep:\n    address: 10.1.0.5\n    via: inner\n"
        "    services:\n      jupyter: {bind: '::1'}\n      tensorboard: {bind: '::'}\n")
    inv = load_inventory(doc)
    text = render_ssh_config(inv)
    deep = text.split("Host deep\n", 1)[1].split("\n\n", 1)[0] + "\n"
    assert "  ProxyJump outer,inner\n" in deep
    assert "  LocalForward 127.0.0.1:8888 [::1]:8888\n" in deep
    assert "  LocalForward 127.0.0.1:6006 [::1]:6006\n" in deep
    assert "Host inner\n" in text and "  ProxyJump outer\n" in text.split("Host inner\n", 1)[1]


def test_exec_start_placeholders(inv: Inventory) -> None:
    gpu2 = inv.node("gpu2")
    svc = gpu2.service("jupyter")
    assert svc is not None
    assert exec_start(gpu2, svc) == (
        "/opt/jupyter/bin/jupyter server --config=/etc/provision/jupyter/jupyter/jupyter_server_config.py")
    gpu1 = inv.node("gpu1")
    tb = gpu1.service("tensorboard")
    assert tb is not None
    # no venv: the catalog's default python env, from its content-addressed directory
    assert exec_start(gpu1, tb) == (f"{tb.venv}/bin/tensorboard --logdir /srv/runs --host 127.0.0.1 "
                                    "--port 6006")
    assert tb.env == "tensorboard" and tb.venv is not None
    assert tb.venv.startswith("/opt/provision/envs/tensorboard-")


def test_config_placeholder_outside_jupyter_is_refused(tmp_path: Path) -> None:
    doc = tmp_path / "inv.yml"
    doc.write_text("version: 1\nhosts:\n  box:\n    address: 10.0.0.5\n    ssh_from: [10.0.0.0/8]\n"
                   "    services:\n      api: {port: 8000, command: '/opt/api --conf {config}'}\n")
    # Refused when the inventory is loaded, before anything renders.
    with pytest.raises(InventoryError, match=r"\{config\} is the rendered Jupyter config"):
        load_inventory(doc)


def _load_config(content: str, path: str) -> Config:
    """Run the rendered file the way Jupyter does: with get_config() in its globals, a
    traitlets Config (whose sections appear when a setting is made)."""
    cfg = Config()
    exec(compile(content, path, "exec"), {"get_config": lambda: cfg})
    return cfg


def _load_jupyter_config(content: str, path: str) -> Config:
    return _load_config(content, path).ServerApp


def test_jupyter_config(inv: Inventory) -> None:
    a = next(a for a in render_host(inv, inv.node("gpu2")) if a.kind == "jupyter-config")
    cfg = _load_config(a.content, a.path)
    assert dict(cfg.ServerApp) == {"ip": "127.0.0.1", "port": 8888, "open_browser": False,
                                   "port_retries": 0, "root_dir": "/srv/notebooks"}
    # idle kernels culled by default: an hour, connected or not, never while busy
    assert dict(cfg.MappingKernelManager) == {"cull_idle_timeout": 3600, "cull_interval": 300,
                                              "cull_connected": True, "cull_busy": False}
    a1 = next(a for a in render_host(inv, inv.node("gpu1")) if a.kind == "jupyter-config")
    assert _load_jupyter_config(a1.content, a1.path).root_dir == os.path.expanduser("~")


def test_culling_is_the_inventorys_and_only_for_jupyter(tmp_path: Path) -> None:
    doc = tmp_path / "inv.yml"
    doc.write_text("version: 1\nhosts:\n  box:\n    address: 10.0.0.5\n    ssh_from: [10.0.0.0/8]\n"
                   "    services:\n      jupyter: {venv: /opt/v, culling: {idle_timeout: 600, "
                   "connected: false}}\n      lab2: {port: 8890, venv: /opt/v, command: "
                   "'{venv}jupyter server --config={config}', culling: {idle_timeout: 0}}\n"
                   "      tensorboard: {venv: /opt/v}\n")
    inv = load_inventory(doc)
    arts = {a.service: a for a in render_host(inv, inv.node("box")) if a.kind == "jupyter-config"}
    one = _load_config(arts["provision-jupyter.service"].content, "jupyter")
    assert dict(one.MappingKernelManager) == {"cull_idle_timeout": 600, "cull_interval": 300,
                                              "cull_connected": False, "cull_busy": False}
    off = _load_config(arts["provision-lab2.service"].content, "lab2")
    assert off.MappingKernelManager.cull_idle_timeout == 0  # Jupyter's "never"
    assert "never shut down" in arts["provision-lab2.service"].content
    assert inv.node("box").services[2].culling is None  # tensorboard has no kernels


# --- hostile-but-valid values stay on their line -----------------------------------------------

HOSTILE = TESTS / "fixtures" / "hostile.yml"  # odd but valid names, paths and commands


def test_hostile_values_render_one_line_each() -> None:
    inv = load_inventory(HOSTILE)
    host = inv.node("H-1_x_y")
    arts = {a.path: a for a in render_host(inv, host)}

    unit = arts["/etc/systemd/system/provision-s_9.x-.service"].content.splitlines()
    assert [ln for ln in unit if ln.startswith("ExecStart=")] == [
        "ExecStart=/o/v=1,2:@+/bin/srv --x=a,b q ;&|`(id)` :: 65535 _svc #c"]
    assert [ln for ln in unit if ln.startswith("User=")] == ["User=_svc"]

    jup = arts["/etc/provision/jupyter/jupyter/jupyter_server_config.py"].content.splitlines()
    assert [ln for ln in jup if ln.startswith("c.")] == [
        "c.ServerApp.ip = '::1'", "c.ServerApp.port = 8888", "c.ServerApp.port_retries = 0",
        "c.ServerApp.open_browser = False", "c.ServerApp.root_dir = '/srv/n/b=o,o:k@s+'",
        "c.MappingKernelManager.cull_idle_timeout = 3600",
        "c.MappingKernelManager.cull_interval = 300",
        "c.MappingKernelManager.cull_connected = True", "c.MappingKernelManager.cull_busy = False"]

    v6 = [ln for ln in arts["/etc/iptables/rules.v6"].content.splitlines() if "--dport" in ln]
    assert v6 == [
        "-A PROVISION-INPUT -s ::/0 -p tcp -m tcp --dport 65535 -m conntrack --ctstate NEW"
        ' -m comment --comment "service s_9.x-" -j ACCEPT',
    ]
    v4 = [ln for ln in arts["/etc/iptables/rules.v4"].content.splitlines() if "--dport" in ln]
    assert v4 == [
        "-A PROVISION-INPUT -s 192.0.2.7/32 -p tcp -m tcp --dport 22 -m conntrack --ctstate NEW"
        ' -m comment --comment "ssh" -j ACCEPT',
    ]

    cfg = render_ssh_config(inv).splitlines()
    i = cfg.index("Host H-1_x_y")
    assert cfg[i + 1 : i + 7] == [
        "  HostName a-b.example.", "  User _x-y", "  Port 22",
        "  IdentityFile ~/.ssh/k=1,2:3@h+x", "  IdentitiesOnly yes", "  ProxyJump j_b-9"]
    assert cfg[i + 7 : i + 9] == ["  # jupyter", "  LocalForward 127.0.0.1:8888 [::1]:8888"]
    assert "  UserKnownHostsFile /k/n=o,w:n@x/known_hosts" in cfg
    assert "Host j_b-9 H-1_x_y" in cfg


# --- ssh-config --write ------------------------------------------------------------------------

@pytest.mark.parametrize("text,present", [
    ("Include config.d/*.conf\n", True),
    ("include ~/.ssh/config.d/*\n", True),
    ("  Include=config.d/provision.conf other/*\n", True),
    ("Include other.d/*.conf\n", False),
    ("# Include config.d/*.conf\n", False),
    ("Host x\n  User y\n", False),
    ("", False),
])
def test_has_include(text: str, present: bool) -> None:
    assert has_include(text) is present


def test_with_include_only_prepends() -> None:
    original = "Host a\n  User b\n\n# trailing comment without newline"
    assert with_include(original) == f"{INCLUDE_LINE}\n{original}"


def test_install_is_idempotent_and_touches_nothing_else(tmp_path: Path) -> None:
    ssh = tmp_path / ".ssh"
    ssh.mkdir(mode=0o700)
    (ssh / "config").write_text("Host github.com\n  User git\n")
    os.chmod(ssh / "config", 0o644)
    (ssh / "known_hosts").write_text("x\n")
    first = install("CONTENT\n", ssh)
    assert len(first) == 3
    assert (ssh / "config").read_text() == f"{INCLUDE_LINE}\nHost github.com\n  User git\n"
    assert stat.S_IMODE((ssh / "config").stat().st_mode) == 0o644
    assert stat.S_IMODE((ssh / "config.d").stat().st_mode) == 0o700
    assert stat.S_IMODE((ssh / "config.d" / "provision.conf").stat().st_mode) == 0o600
    assert (ssh / "known_hosts").read_text() == "x\n"
    assert install("CONTENT\n", ssh) == []
    assert (ssh / "config").read_text().count(INCLUDE_LINE) == 1
    assert install("NEW\n", ssh) == [f"updated {ssh / 'config.d' / 'provision.conf'}"]


def test_install_keeps_a_symlinked_config(tmp_path: Path) -> None:
    ssh = tmp_path / ".ssh"
    ssh.mkdir()
    real = tmp_path / "dotfiles-ssh-config"
    real.write_text("Host a\n")
    (ssh / "config").symlink_to(real)
    install("C\n", ssh)
    assert (ssh / "config").is_symlink()
    assert real.read_text() == f"{INCLUDE_LINE}\nHost a\n"


def test_install_creates_a_missing_config(tmp_path: Path) -> None:
    ssh = tmp_path / ".ssh"
    changes = install("C\n", ssh)
    assert (ssh / "config").read_text() == f"{INCLUDE_LINE}\n"
    assert stat.S_IMODE(ssh.stat().st_mode) == 0o700
    assert len(changes) == 4


# --- the commands ------------------------------------------------------------------------------

def test_render_command(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["render", "-i", str(FIXTURE), "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    files = json.loads(r.output)["files"]
    assert str(out / "ssh_config") in files
    assert str(out / "gpu1" / "etc" / "iptables" / "rules.v6") in files
    r = CliRunner().invoke(main, ["render", "-i", str(FIXTURE), "--out", str(out)])
    assert r.exit_code == 0 and "gpu2" in r.output


def test_render_command_refuses_lockout(tmp_path: Path) -> None:
    doc = tmp_path / "inv.yml"
    doc.write_text("version: 1\nhosts:\n  lonely: {address: 10.9.9.9}\n")
    r = CliRunner().invoke(main, ["render", "-i", str(doc), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2
    assert "lock the operator out" in r.output


def test_ssh_config_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    runner = CliRunner()
    r = runner.invoke(main, ["ssh-config", "-i", str(FIXTURE)])
    assert r.exit_code == 0 and r.output.startswith("# Managed by provision")
    r = runner.invoke(main, ["ssh-config", "-i", str(FIXTURE), "--write", "--json"])
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.output)["changed"]) == 4
    r = runner.invoke(main, ["ssh-config", "-i", str(FIXTURE), "--write"])
    assert r.exit_code == 0 and "nothing changed" in r.output
    installed = (tmp_path / ".ssh" / "config.d" / "provision.conf").read_text()
    assert installed == render_ssh_config(load_inventory(FIXTURE))
    r = runner.invoke(main, ["ssh-config", "-i", str(FIXTURE), "--user", "Bad User"])
    assert r.exit_code == 2


def test_service_units_have_a_tmp_of_their_own(inv: Inventory) -> None:
    """PrivateTmp: a symlink another account plants in /tmp cannot redirect what a service
    writes there (issue 34); `private_tmp: false` gives the shared one back."""
    units = [a for h in inv.hosts for a in render_host(inv, h)
             if a.kind == "unit" and a.path.endswith(tuple(s.unit_name for s in h.services))]
    assert len(units) == sum(len(h.services) for h in inv.hosts)
    for unit in units:
        assert "\nPrivateTmp=yes\n" in unit.content, unit.path
        assert "NoNewPrivileges=yes" in unit.content


def test_a_service_whose_files_are_under_tmp_gets_them_bound_into_its_own(tmp_path: Path) -> None:
    """A venv in a checkout under /tmp (a clone there once made every lab unit fail with
    203/EXEC) stays visible: bound read-only into the private /tmp."""
    doc = yaml.safe_load(FIXTURE.read_text())
    doc["hosts"]["gpu1"]["services"] = {
        "tensorboard": {"logdir": "/srv/runs", "venv": "/tmp/clone/.venv"},
        "shared": {"port": 9000, "command": "/bin/true", "private_tmp": False}}
    path = tmp_path / "inv.yml"
    path.write_text(yaml.safe_dump(doc))
    inv2 = load_inventory(path)
    units = {a.path.rsplit("/", 1)[1]: a.content for a in render_host(inv2, inv2.node("gpu1"))
             if a.kind == "unit"}
    tb = units["provision-tensorboard.service"]
    assert "\nPrivateTmp=yes\nBindReadOnlyPaths=/tmp/clone/.venv\nNoNewPrivileges" in tb
    assert "PrivateTmp" not in units["provision-shared.service"]
    assert "# The shared /tmp (private_tmp: false in the inventory)." in units["provision-shared.service"]
