"""The inventory's sshd options against gpu1, through the bastion (issue 38): VS Code
Remote-SSH's forwarding (`ssh -N -L` and `ssh -D`, as bob, a member without sudo) carries
real traffic to a loopback listener on gpu1 where the inventory says `AllowTcpForwarding:
local` and is refused where it says nothing (no tunnel service: `no`); the chosen values
read back from `sshd -T`; a refused option exits 2 and changes nothing. lynis's own view of
the sshd settings is printed (run with `-s`).

Works on gpu1 only (users and sshd steps), and puts its stock sshd back at the end.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import Lab, one_host_inventory

pytestmark = pytest.mark.lab

HOST = "gpu1"
DROPIN = "/etc/ssh/sshd_config.d/00-provision.conf"
PLAYBOOK = "name: sshd-options\nhosts: [all]\nsteps: [users, sshd]\n"
MARK = "sshd-options-listener-ok"
REMOTE_PORT = 18080  # the loopback listener on gpu1
LOCAL_L, LOCAL_D = 28080, 28081  # in the operator namespace
LISTENER = "sshdopts-listener"
CHOSEN = {"AllowTcpForwarding": "local", "MaxSessions": 3, "ClientAliveInterval": 45}


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def apply(lab: Lab, inventory: Path, playbook: Path) -> tuple[int, dict[str, Any], str]:
    return lab.provision_json("apply", "--yes", "--playbook", str(playbook), "-i", str(inventory),
                              HOST)


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("sshdopts")
    plain = one_host_inventory(lab, HOST, services={})
    editors = json.loads(json.dumps(plain))
    editors["hosts"][HOST]["sshd"] = CHOSEN
    refused = json.loads(json.dumps(plain))
    refused["hosts"][HOST]["sshd"] = {"MaxSessions": 2, "PasswordAuthentication": True}
    lab.host(HOST, "sh", "-c", f"mkdir -p /srv/{LISTENER} && echo {MARK} > /srv/{LISTENER}/index.html")
    lab.host(HOST, "systemd-run", f"--unit={LISTENER}", "/usr/bin/python3", "-m", "http.server",
             "--bind", "127.0.0.1", "--directory", f"/srv/{LISTENER}", str(REMOTE_PORT))
    (d / "playbook.yml").write_text(PLAYBOOK)
    yield {"dir": d, "playbook": d / "playbook.yml", "plain": write(d / "plain.yml", plain),
           "editors": write(d / "editors.yml", editors),
           "refused": write(d / "refused.yml", refused)}
    lab.host(HOST, "sh", "-c", f"systemctl stop {LISTENER}; rm -rf /srv/{LISTENER} {DROPIN}; "
             "pkill -u bob; systemctl reload ssh.service", check=False)


def _ssh_as_bob(lab: Lab, *args: str) -> list[str]:
    """Real OpenSSH as bob (his own key) to gpu1, jumping through the bastion as the lab's
    ssh_config says: what a researcher's VS Code runs."""
    return ["ip", "netns", "exec", lab.plan.operator.netns, "ssh", "-F", str(lab.ssh_config),
            "-o", f"UserKnownHostsFile={lab.known_hosts}", "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "ExitOnForwardFailure=yes",
            "-l", "bob", "-i", str(lab.dir / "team" / "bob"), "-o", "IdentitiesOnly=yes",
            *args, HOST]


@contextlib.contextmanager
def forwarding(lab: Lab, tmp_path: Path, *args: str) -> Iterator[Path]:
    """`ssh -N ARGS` as bob in the background, until its local listener accepts; yields the
    file its stderr goes to."""
    err = tmp_path / f"ssh-{time.monotonic_ns()}.err"
    with err.open("w") as f:
        proc = subprocess.Popen(_ssh_as_bob(lab, "-N", *args), stderr=f, stdout=subprocess.DEVNULL)
    port = LOCAL_L if "-L" in args else LOCAL_D
    try:
        deadline = time.monotonic() + 30
        while lab.op("bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}", check=False).returncode:
            assert proc.poll() is None, f"ssh exited {proc.returncode}: {err.read_text()}"
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.2)
        yield err
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def fetch(lab: Lab, *curl: str) -> subprocess.CompletedProcess[str]:
    return lab.op("curl", "-sS", "--max-time", "10", *curl, check=False)


def effective(lab: Lab) -> dict[str, str]:
    out = lab.host(HOST, "sshd", "-T", "-C", "user=bob,host=x,addr=192.0.2.1").stdout
    return dict(ln.split(" ", 1) for ln in out.splitlines() if " " in ln)


def test_forwarding_is_refused_where_the_inventory_does_not_allow_it(
        lab: Lab, world: dict[str, Any], tmp_path: Path) -> None:
    code, data, err = apply(lab, world["plain"], world["playbook"])
    assert code == 0, err + json.dumps(data, indent=1)
    assert effective(lab)["allowtcpforwarding"] == "no"
    with forwarding(lab, tmp_path, "-L", f"127.0.0.1:{LOCAL_L}:127.0.0.1:{REMOTE_PORT}") as e:
        r = fetch(lab, f"http://127.0.0.1:{LOCAL_L}/")
        assert MARK not in r.stdout and r.returncode != 0, r
        deadline = time.monotonic() + 10  # ssh writes the refusal when the channel fails
        while "administratively prohibited" not in e.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "administratively prohibited" in e.read_text(), e.read_text()
    with forwarding(lab, tmp_path, "-D", f"127.0.0.1:{LOCAL_D}"):
        r = fetch(lab, "--socks5-hostname", f"127.0.0.1:{LOCAL_D}",
                  f"http://127.0.0.1:{REMOTE_PORT}/")
        assert MARK not in r.stdout and r.returncode != 0, r


def test_vscode_forwarding_works_where_the_inventory_allows_it(
        lab: Lab, world: dict[str, Any], tmp_path: Path) -> None:
    code, data, err = apply(lab, world["editors"], world["playbook"])
    assert code == 0, err + json.dumps(data, indent=1)
    eff = effective(lab)
    assert (eff["allowtcpforwarding"], eff["maxsessions"], eff["clientaliveinterval"]) == (
        "local", "3", "45")
    # provision's tightened defaults, as sshd runs them
    assert (eff["clientalivecountmax"], eff["tcpkeepalive"], eff["compression"]) == (
        "2", "no", "no")
    assert eff["passwordauthentication"] == "no"
    assert lab.host(HOST, "stat", "-c", "%a %U", DROPIN).stdout.split() == ["600", "root"]
    with forwarding(lab, tmp_path, "-L", f"127.0.0.1:{LOCAL_L}:127.0.0.1:{REMOTE_PORT}"):
        r = fetch(lab, f"http://127.0.0.1:{LOCAL_L}/")
        assert MARK in r.stdout, r
    with forwarding(lab, tmp_path, "-D", f"127.0.0.1:{LOCAL_D}"):
        r = fetch(lab, "--socks5-hostname", f"127.0.0.1:{LOCAL_D}",
                  f"http://127.0.0.1:{REMOTE_PORT}/")
        assert MARK in r.stdout, r
    # a second apply is a no-op: the options read back as written (sshd -T's view matches)
    code, data, err = apply(lab, world["editors"], world["playbook"])
    assert code == 0, err
    (h,) = data["hosts"]
    assert (h["status"], h["changes"], h["remote_execs"]) == ("ok", 0, 1), h


def test_a_refused_option_exits_2_and_changes_nothing(lab: Lab, world: dict[str, Any]) -> None:
    before = lab.host(HOST, "sha256sum", DROPIN).stdout
    code, data, err = apply(lab, world["refused"], world["playbook"])
    assert code == 2, (err, data)
    assert re.search(r"refused\.yml:\d+:\d+: hosts\.gpu1\.sshd\.PasswordAuthentication: "
                     r"'PasswordAuthentication' is refused", err), err
    assert lab.host(HOST, "sha256sum", DROPIN).stdout == before
    assert effective(lab)["passwordauthentication"] == "no"


def test_lynis_sees_the_tightened_sshd(lab: Lab, world: dict[str, Any]) -> None:
    """lynis's SSH-7408 (options) from its own log: what it still suggests, printed."""
    if lab.host(HOST, "sh", "-c", "command -v lynis", check=False).returncode != 0:
        pytest.skip("lynis not installed on the machine (LAB_DEBS)")
    lab.host(HOST, "lynis", "audit", "system", "--quick", "--tests-from-group", "ssh",
             timeout=300, check=False)
    log = lab.host(HOST, "cat", "/var/log/lynis-report.dat").stdout
    ssh = [ln for ln in log.splitlines() if ln.startswith("suggestion[]=SSH-7408")]
    print("\nlynis SSH-7408 suggestions:\n" + "\n".join(ssh))
    for option in ("Compression", "TCPKeepAlive", "ClientAliveCountMax", "MaxAuthTries",
                   "LoginGraceTime", "X11Forwarding", "AllowAgentForwarding"):
        assert not any(f"|{option} (" in ln for ln in ssh), (option, ssh)
