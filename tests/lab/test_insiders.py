"""A team member without sudo (bob), with a shell on gpu1 over his own login, against the
host and his teammates (issue 34; docs/trust-model.md#the-people-on-the-host): he races an
apply that rewrites his keys, reaches for the host lock, reads alice's home, and plants
symlinks in /tmp for a service's files. Each attack changes nothing outside his own files.
(His reach for alice's Jupyter is in test_team_notebooks.py, where her server runs.)"""

from __future__ import annotations

import json
import shlex
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
PLAYBOOK = "name: insiders\nhosts: [all]\nsteps: [users, services]\n"
VICTIM = "/etc/provision-victim.conf"  # a file of root's the racer aims at
RACES = 8


def as_bob(lab: Lab, command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A shell command as bob, over his own SSH login (real OpenSSH, his own key)."""
    return lab.ssh(HOST, "sh", "-c", command, check=check,
                   extra=("-l", "bob", "-i", str(lab.dir / "team" / "bob"),
                          "-o", "IdentitiesOnly=yes"))


def inventory(lab: Lab, d: Path, n: int) -> Path:
    """The team (alice with sudo, bob without), bob's keys changed by `n` (each apply
    rewrites his authorized_keys), and TensorBoard from the lab's venv."""
    doc = one_host_inventory(lab, HOST, services={
        "tensorboard": {"logdir": "/srv/runs", "venv": lab.plan.venv}})
    doc["team"]["bob"]["keys"] = [*doc["team"]["bob"]["keys"],
                                  *(["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBNrAxpAm3PHPEOLnlZSVMhiQ"
                                     "8nLQP/kB8wiOhNp3a9X extra@lab"] if n % 2 else [])]
    path = d / f"inventory-{n % 2}.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def apply(lab: Lab, inv: Path, playbook: Path) -> tuple[int, dict[str, Any], str]:
    return lab.provision_json("apply", HOST, "--yes", "--playbook", str(playbook), "-i", str(inv))


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("insiders")
    (d / "playbook.yml").write_text(PLAYBOOK)
    lab.host(HOST, "sh", "-c", f"printf 'root only\\n' > {VICTIM}; chmod 0644 {VICTIM}")
    code, data, err = apply(lab, inventory(lab, d, 0), d / "playbook.yml")
    assert code == 0, err + json.dumps(data, indent=1)
    yield {"dir": d, "playbook": d / "playbook.yml"}
    lab.host(HOST, "sh", "-c", f"rm -f {VICTIM}; pkill -u bob; systemctl disable --now "
             "provision-tensorboard.service; rm -f /etc/systemd/system/provision-tensorboard.service;"
             " systemctl daemon-reload", check=False)


def test_bob_racing_an_apply_that_rewrites_his_keys_changes_nothing_outside_his_home(
        lab: Lab, world: dict[str, Any]) -> None:
    """The attack that made bob root: while root rewrote his keys through a temp file it
    chowned by name, bob swapped the temp file (and ~/.ssh) for symlinks to a system file.
    Now the rewrite is made as bob: he races it as fast as his shell goes, over his own
    login, through several applies, and no file outside his home changes."""
    racer = (f"cd ~ && victim={VICTIM} && while :; do "
             "for t in .ssh/.provision-tmp.*; do ln -sfn \"$victim\" \"$t\" 2>/dev/null; done; "
             "mv -f .ssh .ssh-real 2>/dev/null; ln -sfn /etc .ssh 2>/dev/null; "
             "rm -f .ssh 2>/dev/null; mv -f .ssh-real .ssh 2>/dev/null; done")
    as_bob(lab, f"nohup setsid sh -c {shlex.quote(racer)} >/dev/null 2>&1 & echo $!")
    before = lab.host(HOST, "sh", "-c", "stat -c '%u %g %a %s %Y' /etc/sudoers.d/* "
                      f"{VICTIM} /etc/passwd /etc/shadow; md5sum {VICTIM}").stdout
    results = []
    try:
        for n in range(1, RACES + 1):
            code, data, err = apply(lab, inventory(lab, world["dir"], n), world["playbook"])
            results.append(code)
            after = lab.host(HOST, "sh", "-c", "stat -c '%u %g %a %s %Y' /etc/sudoers.d/* "
                             f"{VICTIM} /etc/passwd /etc/shadow; md5sum {VICTIM}").stdout
            assert after == before, (n, err)
        # the racer ran beside every apply
        assert lab.host(HOST, "pgrep", "-u", "bob", "-f", "provision-tmp", check=False).stdout.strip(), results
    finally:
        lab.host(HOST, "pkill", "-KILL", "-u", "bob", check=False)
    # the racer stopped anywhere; say he left ~/.ssh a link to /etc: the next apply refuses
    # it, naming it, and /etc is untouched
    lab.host(HOST, "runuser", "-u", "bob", "--", "sh", "-c",
             "cd /home/bob; if [ -L .ssh ]; then rm -f .ssh; fi; "
             "if [ ! -d .ssh ] && [ -d .ssh-real ]; then mv -f .ssh-real .ssh; fi; "
             "rm -rf .ssh-real .ssh-keep .ssh/.ssh-real; mkdir -p .ssh; rm -f .ssh/.provision-tmp.*; "
             "mv -f .ssh .ssh-keep; ln -s /etc .ssh")
    code, data, err = apply(lab, inventory(lab, world["dir"], 0), world["playbook"])
    assert code == 1 and "refusing /home/bob/.ssh: it is a symlink (to /etc)" in err + json.dumps(data)
    assert lab.host(HOST, "sh", "-c", "stat -c '%u %g %a %s %Y' /etc/sudoers.d/* "
                    f"{VICTIM} /etc/passwd /etc/shadow; md5sum {VICTIM}").stdout == before
    # bob puts his ~/.ssh back: the next apply converges his keys as the inventory says
    lab.host(HOST, "runuser", "-u", "bob", "--", "sh", "-c",
             "cd /home/bob && rm -f .ssh && { [ ! -d .ssh-keep ] || mv -f .ssh-keep .ssh; }")
    code, data, err = apply(lab, inventory(lab, world["dir"], 0), world["playbook"])
    assert code == 0, err + json.dumps(data, indent=1)
    # nothing of bob's outside his home, where root works (his login's /run/user/UID, and the
    # machine's own lab directories seen through the overlay, aside)
    mine = lab.host(HOST, "find", "/etc", "/root", "/var/lib", "/usr/local", "/run", "-xdev",
                    "(", "-path", "/run/user", "-o", "-path", "/var/lib/provision-lab", ")",
                    "-prune", "-o", "-user", "bob", "-print", check=False).stdout.split()
    assert mine == [], mine
    keys = lab.host(HOST, "stat", "-c", "%U %a", "/home/bob/.ssh/authorized_keys").stdout.split()
    assert keys == ["bob", "600"]


def test_bob_cannot_reach_the_host_lock(lab: Lab, world: dict[str, Any]) -> None:
    """The lock was world-readable, and flock needs only a descriptor: bob held every apply
    off the host. Now /run/provision is root's alone."""
    r = as_bob(lab, "flock -n -s /run/provision/converge.lock sleep 60", check=False)
    assert r.returncode != 0 and "Permission denied" in r.stderr, r.stderr
    st = lab.host(HOST, "stat", "-c", "%U %a", "/run/provision", "/run/provision/converge.lock",
                  "/run/provision/converge.work").stdout.split("\n")
    assert st[:3] == ["root 700", "root 600", "root 600"], st


def test_bob_cannot_read_alices_home(lab: Lab, world: dict[str, Any]) -> None:
    lab.host(HOST, "sh", "-c", "echo 'her notes' > /home/alice/notes.ipynb && "
             "chown alice:alice /home/alice/notes.ipynb")
    assert lab.host(HOST, "stat", "-c", "%a", "/home/alice", "/home/bob").stdout.split() == ["700", "700"]
    r = as_bob(lab, "cat /home/alice/notes.ipynb; ls /home/alice", check=False)
    assert r.returncode != 0 and "her notes" not in r.stdout and "Permission denied" in r.stderr


def test_a_symlink_bob_plants_in_tmp_redirects_no_write_of_a_service(
        lab: Lab, world: dict[str, Any]) -> None:
    """TensorBoard writes its run info under /tmp/.tensorboard-info, following a symlink
    there: bob points it at a directory of his that anyone may write. The service runs as
    its own account with a /tmp of its own: nothing arrives."""
    as_bob(lab, "rm -rf /tmp/.tensorboard-info ~/trap; mkdir -m 0777 ~/trap; chmod 0711 ~; "
                "ln -s ~/trap /tmp/.tensorboard-info")
    try:
        unit = "provision-tensorboard.service"
        user = lab.host(HOST, "systemctl", "show", "-p", "User", "-p", "PrivateTmp", unit).stdout.split()
        assert user == ["User=svc-tensorboard", "PrivateTmp=yes"], user
        lab.host(HOST, "systemctl", "restart", unit)
        deadline = time.monotonic() + 60
        pid = ""
        while time.monotonic() < deadline:
            pid = lab.host(HOST, "systemctl", "show", "-p", "MainPID", "--value", unit).stdout.strip()
            if pid != "0" and lab.host(HOST, "sh", "-c", f"ls /proc/{pid}/root/tmp/.tensorboard-info",
                                       check=False).stdout.strip():
                break
            time.sleep(0.5)
        # it wrote its run info, into its own /tmp
        assert f"pid-{pid}.info" in lab.host(
            HOST, "ls", f"/proc/{pid}/root/tmp/.tensorboard-info").stdout
        assert lab.host(HOST, "ls", "-A", "/home/bob/trap").stdout == ""
    finally:
        as_bob(lab, "rm -rf /tmp/.tensorboard-info ~/trap; chmod 0700 ~", check=False)
