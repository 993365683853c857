"""The commit-confirmed scripts as text and their answers parsed (provision.steps.commit).
The scripts run by `sh` (the confirm/rollback race): tests/integration/test_guards_commit_sh.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.steps import commit as C
from provision.steps.actions import WriteFile

CID = "sshd-0a1b2c3d"


def _action(host: Path, kind: C.Kind = "sshd") -> C.CommitConfirmed:
    target = host / "etc" / "50-provision.conf"
    write = WriteFile(str(target), "PasswordAuthentication no\n")
    return C.CommitConfirmed(kind, "gpu1", (C.Staged(write, kind if kind == "sshd" else "unit"),),
                             "ssh.service" if kind == "sshd" else "provision-firewall.service")


# --- the answers the shell layer acts on -------------------------------------------------------

def test_confirmed_reads_whole_lines_only() -> None:
    assert C.confirmed("noise\n@confirmed\n") is True
    assert C.confirmed("@too-late\n") is False
    assert C.confirmed("@confirmed-ish\n@too-late-x\n") is None
    assert C.confirmed("") is None


def test_split_sections_and_parse_apply() -> None:
    head, parts = C.split_sections("batch 1\nbatch 2\n@commit\t0\n@armed\n@commit\t1\n@invalid\nwhy\n")
    assert head == "batch 1\nbatch 2" and parts == ["@armed", "@invalid\nwhy"]
    assert C.split_sections("") == ("", [])
    assert C.split_sections("@commit\t0\n") == ("", [""])
    r = C.parse_apply("@armed\n@armed-at x\n@applied\n@applied-at 2.5\n  \n  said  \n")
    assert r == C.ApplyResult(armed=True, applied=True, armed_at=None, applied_at=2.5,
                              message="said")
    assert C.parse_apply("a\nb\n").message == "a / b"
    assert C.parse_apply("@apply-failed\n").failed


def test_parse_status_and_its_timings() -> None:
    st = C.parse_status("@result rolled-back \n@armed-at 10\n@restored-at 16.5\n"
                        "@log rollback started 16.25\n@log rollback done 16.5\nnoise\n")
    assert st.result == "rolled-back" and st.log == ("rollback started 16.25", "rollback done 16.5")
    assert st.started_at == 16.25 and st.fired_seconds == 6.25 and st.rollback_seconds == 6.5
    assert C.Status("pending").fired_seconds is None and C.Status("x").rollback_seconds is None
    assert C.Status("x", armed_at=1.0).fired_seconds is None
    assert C.Status("x", armed_at=1.0).rollback_seconds is None
    assert C.Status("x", restored_at=1.0).rollback_seconds is None
    assert C.Status("x", log=("rollback started 5",)).fired_seconds is None


def test_confirm_window_edges() -> None:
    r = [C.ApplyResult(armed=True, applied=True, armed_at=100.0, applied_at=104.0)]
    assert C.confirm_window(10, r) == 6.0
    assert C.confirm_window(3, r) == 0.0
    # a host clock that went backwards does not lengthen the window
    back = [C.ApplyResult(armed=True, applied=True, armed_at=100.0, applied_at=99.0)]
    assert C.confirm_window(10, back) == 10.0
    assert C.confirm_window(10, [C.ApplyResult(armed_at=100.0)]) == 10.0
    assert C.confirm_window(10, [C.ApplyResult(applied_at=100.0)]) == 10.0


def test_a_missed_confirmation_is_a_rollback_unless_the_host_says_confirmed() -> None:
    kept, text = C.missed_outcome("sshd", 8, C.Status("confirmed"), "x")
    assert kept and text == ("sshd: confirmed after the 8 s window by a connection that was "
                             "still on its way; the change stays")
    for result in ("rolled-back", "pending", "unknown", ""):
        kept, text = C.missed_outcome("sshd", 8, C.Status(result), "cause")
        assert not kept and text.endswith(" (cause)")
    assert C.rollback_reason("firewall", 5, C.Status("pending"), "") == (
        "firewall: confirmation over a new connection did not arrive within 5 s; the host has "
        "not rolled back yet (still armed); previous rules due soon")
    assert C.rollback_reason("sshd", 5, C.Status("rolled-back"), "") == (
        "sshd: confirmation over a new connection did not arrive within 5 s; previous sshd "
        "config restored")


def test_script_guards() -> None:
    host = Path("/nonexistent")
    a = _action(host)
    with pytest.raises(ValueError, match="at least 1 s"):
        C.apply_script(a, CID, 0)
    assert "--on-active=1 " in C.apply_script(a, CID, 1)
    two = C.CommitConfirmed("sshd", "gpu1", (*a.files, *a.files), "ssh.service")
    with pytest.raises(ValueError, match="exactly the sshd drop-in"):
        C.apply_script(two, CID, 5)
    with pytest.raises(ValueError, match="bad commit id"):
        C.rollback_unit("A")
    assert C.rollback_unit(CID) == f"provision-rollback-{CID}"
    assert C.check_id("a" * 63) and C.state_dir("a") == f"{C.STATE_DIR}/a"
    with pytest.raises(ValueError):
        C.check_id("a" * 64)
    assert "wait_tenths" not in C.status_script(a, CID, wait=0.35)
    assert "-lt 3 ]" in C.status_script(a, CID, wait=0.35)
    assert "-lt 0 ]" in C.status_script(a, CID, wait=-5)


def test_parse_details() -> None:
    r = C.parse_apply("@armed-at 100.5 x\n@applied-at x 2.5\n")
    assert r.armed_at is None and r.applied_at is None  # malformed: never a time
    r = C.parse_apply("@armed-at x 100.5\n@applied-at 2.5 x\n")
    assert r.armed_at is None and r.applied_at is None
    r = C.parse_apply("noise\n")
    assert r.armed_at is None and r.applied_at is None and not r.armed
    assert C.parse_status("").result == "" and C.parse_status("").armed_at is None


def test_exact_texts() -> None:
    with pytest.raises(ValueError, match=r"^the confirmation timeout must be at least 1 s$"):
        C.apply_script(_action(Path("/h")), CID, 0)
    two = C.CommitConfirmed("sshd", "gpu1", (*_action(Path("/h")).files,) * 2, "ssh.service")
    with pytest.raises(ValueError, match=r"^an sshd commit carries exactly the sshd drop-in \(and removes old ones\)$"):
        C.apply_script(two, CID, 5)
    assert "-lt 10 ]" in C.status_script(_action(Path("/h")), CID, wait=1.0)
    st = C.Status("rolled-back", 10.0, 16.5, ("rollback started 16.1",))
    assert C.missed_outcome("sshd", 8, st, "") == (False, (
        "sshd: confirmation over a new connection did not arrive within 8 s; previous sshd "
        "config restored by the host 6.5 s after arming (timer fired at 6.1 s)"))
    assert C.rollback_reason("sshd", 8, C.Status("unknown"), "") == (
        "sshd: confirmation over a new connection did not arrive within 8 s; the host restores "
        "the previous sshd config on its own (could not read its status)")


def test_describe_lists_every_changed_file_and_status_waits_10_s_by_default() -> None:
    a = _action(Path("/h"))
    other = C.Staged(WriteFile("/h/b", "y\n"), "sshd")
    two = C.CommitConfirmed("firewall", "gpu1", (*a.files, other), "u")
    assert "(/h/etc/50-provision.conf, /h/b)" in two.describe()
    assert "-lt 100 ]" in C.status_script(a, CID)
