"""Faults during an apply are one clear line for the host, nothing half-applied (issue 20,
"Bad input and faults": a sudo that needs a password, a disk full while writing a drop-in;
the 404 apt source and the held lock are in test_cloud_image and test_host_lock).

On gpu2 with the sshd step only (a playbook of its own), like test_effect; each test saves
/etc/ssh first and restores it (and sudo, and the mount) in a finally block.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import PROVISION, Lab, one_host_inventory

pytestmark = pytest.mark.lab

HOST = "gpu2"
DIR = "/etc/ssh/sshd_config.d"
DROPIN = f"{DIR}/00-provision.conf"
SUDOERS = "/etc/sudoers.d/zz-provision-test-password"
SAVED = "/root/provision-test-faults-etc-ssh.tar"


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    d = tmp_path_factory.mktemp("faults")
    doc = one_host_inventory(lab, HOST)
    inv = d / "inventory.yml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    book = d / "sshd-only.yml"
    book.write_text("name: sshd-only\nhosts: [all]\nsteps: [sshd]\n")
    yield {"inventory": inv, "playbook": book}


@pytest.fixture
def saved(lab: Lab) -> Iterator[None]:
    """/etc/ssh as this test found it, put back whatever happens (other modules share gpu2)."""
    lab.host(HOST, "tar", "-C", "/etc", "-cf", SAVED, "ssh")
    try:
        yield
    finally:
        lab.host(HOST, "sh", "-c", "; ".join([
            f"umount {DIR} 2>/dev/null", f"rm -f {SUDOERS}",
            f"rm -rf {DIR}", f"tar -C /etc -xf {SAVED}", f"rm -f {SAVED}",
            "rm -rf /var/lib/provision/commit", "systemctl reload ssh.service",
        ]), check=False)


def run(lab: Lab, world: dict[str, Path], command: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    args = [command, "-i", str(world["inventory"]), "--playbook", str(world["playbook"])]
    if command == "apply":
        args += ["--yes", "--confirm-timeout", "30"]
    return lab.provision_json(*args, *extra, HOST)


def human(lab: Lab, world: dict[str, Path]) -> str:
    """The failing apply as an operator sees it (no --json): exit 1, no traceback."""
    r = lab.op(*PROVISION, "apply", "-i", str(world["inventory"]), "--playbook",
               str(world["playbook"]), "--yes", "--confirm-timeout", "30", HOST, check=False,
               timeout=240)
    print(r.stdout + r.stderr)
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    return r.stdout + r.stderr


def reason_cell(table: str) -> str:
    """The host's reason in the human table, its wrapped pieces joined (rich wraps the cell
    at the terminal's width: 80 columns when not a terminal)."""
    rows = [[c.strip() for c in ln.split("\u2502")[1:-1]] for ln in table.splitlines()
            if ln.startswith("\u2502")]
    start = next(i for i, r in enumerate(rows) if r[0] == HOST)
    end = next((i for i in range(start + 1, len(rows)) if rows[i][0]), len(rows))
    return " ".join(r[-1] for r in rows[start:end] if r[-1])


def host(data: dict[str, Any]) -> dict[str, Any]:
    (h,) = data["hosts"]
    return h  # type: ignore[no-any-return]


def etc_ssh(lab: Lab) -> str:
    """Every file under /etc/ssh (temps included) with its digest: what 'nothing changed' means."""
    return lab.host(HOST, "sh", "-c",
                    "cd /etc/ssh && find . -type f | LC_ALL=C sort | xargs sha256sum").stdout


def converges(lab: Lab, world: dict[str, Path]) -> None:
    code, data, err = run(lab, world, "apply")
    assert code == 0, err + json.dumps(data)
    code, data, err = run(lab, world, "plan", "--detailed-exitcode")
    assert code == 0, err + json.dumps(data)  # no changes left


def one_line(err: str, data: dict[str, Any]) -> str:
    assert "Traceback" not in err, err
    h = host(data)
    assert h["status"] == "failed", h
    assert "\n" not in h["error"].strip(), h["error"]
    return str(h["error"])


def test_sudo_that_needs_a_password_is_one_line_and_changes_nothing(
        lab: Lab, world: dict[str, Path], saved: None) -> None:
    lab.host(HOST, "rm", "-f", DROPIN)  # so the apply has something to write
    # later sudoers lines win: admin keeps sudo, but now with a password (the lab grants
    # NOPASSWD in 90-provision-lab-admin, this file sorts after it)
    lab.host(HOST, "sh", "-c", f"echo 'admin ALL=(ALL) ALL' > {SUDOERS} && chmod 440 {SUDOERS}"
             f" && visudo -qcf {SUDOERS}")
    before = etc_ssh(lab)
    seen = human(lab, world)
    code, data, err = run(lab, world, "apply")
    assert code == 1, err + json.dumps(data)
    error = one_line(err, data)
    assert "sudo" in error and "password" in error, error
    assert "authentication" not in error.lower() and "facts" not in error.lower(), error
    assert host(data)["host"] == HOST
    assert "sudo needs a password for admin" in reason_cell(seen), seen
    assert etc_ssh(lab) == before
    lab.host(HOST, "rm", "-f", SUDOERS)
    converges(lab, world)


def test_disk_full_while_writing_the_dropin_is_one_line_and_half_applies_nothing(
        lab: Lab, world: dict[str, Path], saved: None) -> None:
    converges(lab, world)
    # our drop-in, edited on the host: the next apply wants to write it again
    lab.host(HOST, "sh", "-c", f"echo '# edited' >> {DROPIN}")
    # the drop-in directory on a tmpfs holding the same files, then filled to the last byte
    lab.host(HOST, "sh", "-c", "; ".join([
        "set -e", "tmp=$(mktemp -d)", f"cp -a {DIR}/. $tmp/",
        f"mount -t tmpfs -o size=64k,mode=755 provision-test-full {DIR}",
        f"cp -a $tmp/. {DIR}/", "rm -rf $tmp",
        f"dd if=/dev/zero of={DIR}/filler bs=4k 2>/dev/null || true",
        f"! sh -c 'echo x > {DIR}/probe' 2>/dev/null",  # really full
        f"rm -f {DIR}/probe",
    ]))
    before = etc_ssh(lab)
    seen = human(lab, world)
    code, data, err = run(lab, world, "apply")
    assert code == 1, err + json.dumps(data)
    error = one_line(err, data)
    assert "No space left on device" in error, error
    assert "No space left on device" in reason_cell(seen), seen
    assert etc_ssh(lab) == before  # the edited drop-in byte-identical, no temp file left
    # rolled back at once: no rollback left armed (the converge above left its own dir)
    armed = lab.host(HOST, "sh", "-c", "ls -d /var/lib/provision/commit/*/armed 2>/dev/null; "
                     "systemctl list-units --all --no-legend 'provision-rollback-*'", check=False)
    assert armed.stdout.strip() == "", armed.stdout
    lab.host(HOST, "umount", DIR)
    lab.host(HOST, "sh", "-c", f"grep -q '# edited' {DROPIN}")
    converges(lab, world)
    assert "# edited" not in lab.host(HOST, "cat", DROPIN).stdout
