"""Every commit-confirmed script (apply, rollback, confirm, status) of both kinds parses as
sh (`sh -n`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from provision.steps import commit as C
from tests.unit.test_harden_commit import CID, fw, inv, sshd  # noqa: F401 (fixtures)


@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
@pytest.mark.parametrize("kind", ["firewall", "sshd"])
def test_scripts_are_valid_sh(kind: str, request: pytest.FixtureRequest) -> None:
    action: C.CommitConfirmed = request.getfixturevalue("fw" if kind == "firewall" else "sshd")
    for text in (C.apply_script(action, CID, 30), C.rollback_script(action, CID),
                 C.confirm_script(action, CID), C.status_script(action, CID)):
        r = subprocess.run(["sh", "-n"], input=text, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def _rollback_in(tmp: Path, action: C.CommitConfirmed, now: int, deadline: str | None,
                 confirm_while_asleep: bool, *args: str) -> tuple[int, list[str], Path]:
    """The rendered rollback script, its state directory moved under `tmp`, with `date` and
    `sleep` (and everything that would touch the machine) replaced by recorders; `sleep`
    removes the armed marker when `confirm_while_asleep` (a confirmation arriving then)."""
    d = tmp / "commit"
    (d / "old").mkdir(parents=True)
    (d / "armed").touch()
    for save in ("v4.save", "v6.save"):
        (d / "old" / save).write_text("*filter\nCOMMIT\n")
    if deadline is not None:
        (d / "deadline").write_text(deadline + "\n")
    bin_ = tmp / "bin"
    bin_.mkdir()
    log = tmp / "calls"
    for name in ("systemctl", "iptables-restore", "ip6tables-restore", "cp", "mv", "rm"):
        real = shutil.which(name) or ""
        # mv and rm really run only inside the test's directory: never on the machine's files
        body = f'echo "{name} $*" >> {log}\n' + (
            f'case "$*" in *" {tmp}/"*) exec {real} "$@";; esac\n' if name in ("mv", "rm") else "")
        (bin_ / name).write_text("#!/bin/sh\n" + body)
    (bin_ / "date").write_text(f'#!/bin/sh\necho "date $*" >> {log}\n'
                               f'case "$1" in +%s) echo {now};; *) echo {now}.5;; esac\n')
    (bin_ / "sleep").write_text(f'#!/bin/sh\necho "sleep $*" >> {log}\n'
                                + (f'{shutil.which("rm")} -rf {d}\n' if confirm_while_asleep else
                                   f'echo {now + 3600} > /dev/null\n'))
    for f in bin_.iterdir():
        f.chmod(0o755)
    text = C.rollback_script(action, CID).replace(C.state_dir(CID), str(d))
    r = subprocess.run(["sh", "-c", text, "rollback.sh", *args], capture_output=True, text=True,
                       env={"PATH": f"{bin_}:/usr/bin:/bin"}, timeout=30)
    calls = log.read_text().splitlines() if log.exists() else []
    return r.returncode, [c for c in calls if not c.startswith("date")], d


@pytest.mark.parametrize("kind", ["firewall", "sshd"])
def test_the_rollback_waits_out_the_deadline_the_apply_moved_and_a_confirmation_ends_it(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    action: C.CommitConfirmed = request.getfixturevalue("fw" if kind == "firewall" else "sshd")
    code, calls, d = _rollback_in(tmp_path, action, 1000, "1040", confirm_while_asleep=True)
    assert code == 0
    assert calls[0] == "sleep 40"  # the timer fired at arming + timeout; the window runs on
    assert not any(c.startswith(("systemctl", "iptables-restore")) for c in calls), calls
    assert not d.exists()  # confirmed while it slept: nothing restored


@pytest.mark.parametrize("deadline", ["1000", "999", None, "garbage"])
def test_a_deadline_that_has_passed_or_is_unreadable_rolls_back_at_once(
        deadline: str | None, fw: C.CommitConfirmed, tmp_path: Path) -> None:  # noqa: F811
    code, calls, d = _rollback_in(tmp_path, fw, 1000, deadline, confirm_while_asleep=False)
    assert code == 0 and not any(c.startswith("sleep") for c in calls), calls
    assert "iptables-restore -w" in calls and (d / "rolling-back").exists()
    assert (d / "result").read_text().strip() == "rolled-back"


def test_rollback_now_and_a_failed_apply_do_not_wait_for_the_deadline(
        fw: C.CommitConfirmed, tmp_path: Path) -> None:  # noqa: F811
    code, calls, d = _rollback_in(tmp_path, fw, 1000, "1040", False, "now")
    assert code == 0 and not any(c.startswith("sleep") for c in calls), calls
    assert (d / "result").read_text().strip() == "rolled-back"
    for text in (C.rollback_now_script(fw, CID), C.apply_script(fw, CID, 30)):
        assert 'sh "$d/rollback.sh" now' in text
