"""What a login gets, on a real host: the team's umask through pam_umask (Debian's
pam-auth-update), read back from a member's own SSH login, and login.defs' rules.

Works on gpu2 with the lab's team (alice with sudo, bob without) and the `users` and
`login` steps only; login.defs and the PAM stacks are put back as they were at the end.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import Lab, one_host_inventory

pytestmark = pytest.mark.lab

HOST = "gpu2"
PLAYBOOK = "name: login\nhosts: [all]\nsteps: [users, login]\n"
SAVED = "/root/provision-test-login"


def as_member(lab: Lab, user: str, command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A shell command over the member's own SSH login (real OpenSSH, their own key)."""
    return lab.ssh(HOST, "sh", "-c", command, check=check,
                   extra=("-l", user, "-i", str(lab.dir / "team" / user), "-o", "IdentitiesOnly=yes"))


def run(lab: Lab, world: dict[str, Any], verb: str, inv: Path) -> tuple[int, dict[str, Any], str]:
    extra = ("--yes",) if verb == "apply" else ()
    return lab.provision_json(verb, HOST, *extra, "--playbook", str(world["playbook"]), "-i", str(inv))


def login_changes(data: dict[str, Any]) -> list[str]:
    (h,) = data["hosts"]
    return [a["description"] for a in h["actions"] if a.get("step") == "login"]


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("login")
    (d / "playbook.yml").write_text(PLAYBOOK)
    doc = one_host_inventory(lab, HOST)
    doc["hosts"][HOST].pop("services", None)
    (d / "on.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    doc["defaults"]["umask"] = None
    (d / "off.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    lab.host(HOST, "sh", "-c", f"mkdir -p {SAVED} && cp -a /etc/login.defs /etc/pam.d {SAVED}/ "
             f"&& cp -a /var/lib/pam {SAVED}/var-lib-pam")
    yield {"dir": d, "playbook": d / "playbook.yml", "on": d / "on.yml", "off": d / "off.yml"}
    lab.host(HOST, "sh", "-c", f"cp -a {SAVED}/login.defs /etc/login.defs && rm -rf /etc/pam.d "
             f"&& cp -a {SAVED}/pam.d /etc/pam.d && rm -rf /var/lib/pam && cp -a {SAVED}/var-lib-pam "
             f"/var/lib/pam && rm -rf {SAVED} /usr/share/pam-configs/provision-umask", check=False)


def test_a_members_files_are_private_after_the_login_step(lab: Lab, world: dict[str, Any]) -> None:
    code, data, err = run(lab, world, "apply", world["off"])  # the team exists, the umask is the host's
    assert code == 0, err + json.dumps(data, indent=1)
    assert as_member(lab, "bob", "umask").stdout.strip() == "0022"
    code, data, err = run(lab, world, "apply", world["on"])
    assert code == 0, err + json.dumps(data, indent=1)
    # the effect, from bob's own login: his umask, the mode of what he makes, alice's view
    assert as_member(lab, "bob", "umask").stdout.strip() == "0027"
    mode = as_member(lab, "bob", "rm -rf /tmp/bob-login && mkdir /tmp/bob-login && "
                     "echo notes > /tmp/bob-login/f && stat -c '%a' /tmp/bob-login /tmp/bob-login/f")
    assert mode.stdout.split() == ["750", "640"]
    r = as_member(lab, "alice", "cat /tmp/bob-login/f", check=False)
    assert r.returncode != 0 and "notes" not in r.stdout and "Permission denied" in r.stderr
    # root and system accounts keep theirs (uid < 1000)
    assert lab.host(HOST, "su", "-s", "/bin/sh", "-c", "umask", "root").stdout.strip() == "0022"
    defs = lab.host(HOST, "cat", "/etc/login.defs").stdout
    for line in ("UMASK\t\t027", "PASS_MIN_DAYS\t1", "HOME_MODE\t0750", "SHA_CRYPT_MIN_ROUNDS\t65536"):
        assert line in defs, line
    code, data, err = run(lab, world, "plan", world["on"])
    assert code == 0 and login_changes(data) == [], (err, data)


def test_an_idle_root_prompt_closes_and_the_teams_shells_keep_theirs(
        lab: Lab, world: dict[str, Any]) -> None:
    for shell in ("/bin/bash", "/bin/sh"):  # bash and dash read /etc/profile as login shells
        r = lab.host(HOST, "su", "-l", "-s", shell, "-c", "echo ${TMOUT:-none}; TMOUT=5", "root",
                     check=False)
        assert r.stdout.split()[0] == "900", (shell, r.stdout, r.stderr)
        assert "read" in r.stderr and "only" in r.stderr  # a root shell cannot take it back
    r = as_member(lab, "bob", "bash -lc 'echo ${TMOUT:-none}'")
    assert r.stdout.strip() == "none" and r.stderr == "", r


def test_a_profile_disabled_by_hand_shows_in_the_plan_and_comes_back(
        lab: Lab, world: dict[str, Any]) -> None:
    lab.host(HOST, "pam-auth-update", "--package", "--remove", "provision-umask")
    assert as_member(lab, "bob", "umask").stdout.strip() == "0022"
    code, data, err = run(lab, world, "plan", world["on"])
    assert code == 0, err
    [change] = login_changes(data)
    assert "pam-auth-update --package --enable provision-umask" in change
    code, data, err = run(lab, world, "apply", world["on"])
    assert code == 0, err + json.dumps(data, indent=1)
    assert as_member(lab, "bob", "umask").stdout.strip() == "0027"


def test_umask_null_gives_the_sessions_back_and_removes_the_profile(
        lab: Lab, world: dict[str, Any]) -> None:
    code, data, err = run(lab, world, "apply", world["off"])
    assert code == 0, err + json.dumps(data, indent=1)
    assert as_member(lab, "bob", "umask").stdout.strip() == "0022"
    assert lab.host(HOST, "test", "-e", "/usr/share/pam-configs/provision-umask",
                    check=False).returncode == 1
    assert "pam_umask" not in lab.host(HOST, "cat", "/etc/pam.d/common-session").stdout
    code, data, err = run(lab, world, "plan", world["off"])
    assert code == 0 and login_changes(data) == [], (err, data)
