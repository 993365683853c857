"""The commit-confirmed rollback/confirm race (provision.tasks.commit), proven by running
the rendered scripts themselves with `sh` in a temp directory: the confirmation's `rm` and
the rollback's `mv` of one marker file are the lock, so exactly one of them wins, however
they interleave. Nothing outside the temp directory is touched: the state directory and
the managed file live there, and systemctl / iptables-restore are stand-ins on PATH that
only log their arguments (what the real ones do is the lab's business: tests/lab)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from provision.tasks import commit as C
from provision.tasks.actions import WriteFile

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
CID = "sshd-0a1b2c3d"


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp 'host': the state dir under it, stand-in tools on PATH logging to calls.log."""
    monkeypatch.setattr(C, "STATE_DIR", str(tmp_path / "state"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("iptables-restore", "ip6tables-restore"):
        stub = bin_dir / tool
        stub.write_text(f'#!/bin/sh\necho "{tool} $*" >> {tmp_path}/calls.log\n')
        stub.chmod(0o755)
    # ssh.socket is inactive (sshd runs as ssh.service) unless the test creates socket-active
    (bin_dir / "systemctl").write_text(
        f'#!/bin/sh\necho "systemctl $*" >> {tmp_path}/calls.log\n'
        f'[ "$*" = "-q is-active ssh.socket" ] && [ ! -e {tmp_path}/socket-active ] && exit 3\n'
        'exit 0\n')
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return tmp_path


def _action(host: Path, kind: C.Kind = "sshd") -> C.CommitConfirmed:
    target = host / "etc" / "50-provision.conf"
    write = WriteFile(str(target), "PasswordAuthentication no\n")
    return C.CommitConfirmed(kind, "gpu1", (C.Staged(write, kind if kind == "sshd" else "unit"),),
                             "ssh.service" if kind == "sshd" else "provision-firewall.service")


def _arm(host: Path, action: C.CommitConfirmed, cid: str = CID) -> Path:
    """What the apply script leaves behind once armed and applied: the marker, the backup
    (old content) and the new content installed."""
    d = Path(C.state_dir(cid))
    (d / "old").mkdir(parents=True)
    (d / "armed").write_text("")
    (d / "armed-at").write_text("100.0\n")
    (d / "old" / "0").write_text("PasswordAuthentication yes\n")
    (d / "old" / "v4.save").write_text("*filter\nCOMMIT\n")
    (d / "old" / "v6.save").write_text("*filter\nCOMMIT\n")
    target = Path(action.files[0].write.path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(action.files[0].write.content)
    return d


def _sh(script: str) -> str:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False,
                          timeout=60).stdout


def _calls(host: Path) -> str:
    log = host / "calls.log"
    return log.read_text() if log.exists() else ""


def test_a_confirmation_first_stops_the_timer_and_the_rollback_then_does_nothing(host: Path) -> None:
    a = _action(host)
    d = _arm(host, a)
    out = _sh(C.confirm_script(a, CID))
    assert C.confirmed(out) is True
    assert not d.exists()
    assert f"systemctl stop provision-rollback-{CID}.timer" in _calls(host)
    _sh(C.rollback_script(a, CID))
    assert Path(a.files[0].write.path).read_text() == "PasswordAuthentication no\n"
    assert "ssh.service" not in _calls(host), "a rollback after the confirmation touched sshd"
    assert "@result confirmed" in _sh(C.status_script(a, CID, wait=0))


def test_a_rollback_first_restores_and_the_late_confirmation_says_too_late(host: Path) -> None:
    a = _action(host)
    d = _arm(host, a)
    _sh(C.rollback_script(a, CID))
    assert Path(a.files[0].write.path).read_text() == "PasswordAuthentication yes\n"
    assert "systemctl reload ssh.service" in _calls(host)
    assert "restart" not in _calls(host)
    assert (d / "result").read_text() == "rolled-back\n"
    out = _sh(C.confirm_script(a, CID))
    assert C.confirmed(out) is False
    assert "timer" not in _calls(host), "a late confirmation must not touch the timer"
    st = C.parse_status(_sh(C.status_script(a, CID, wait=0)))
    assert st.result == "rolled-back" and st.armed_at == 100.0
    assert st.restored_at is not None and st.started_at is not None
    assert not d.exists(), "the status script cleans up after reporting"


def test_a_rollback_under_socket_activation_restarts_never_reloads(host: Path) -> None:
    """Started from ssh.socket, a reload's re-exec loses the socket and sshd exits (see the
    apply script): the rollback restarts the running service instead."""
    (host / "socket-active").write_text("")
    a = _action(host)
    _arm(host, a)
    _sh(C.rollback_script(a, CID))
    assert Path(a.files[0].write.path).read_text() == "PasswordAuthentication yes\n"
    assert "systemctl restart ssh.service" in _calls(host)
    assert "reload" not in _calls(host)


def test_a_file_that_did_not_exist_before_is_removed_by_the_rollback(host: Path) -> None:
    a = _action(host)
    d = _arm(host, a)
    (d / "old" / "0").unlink()
    (d / "old" / "0.absent").write_text("")
    _sh(C.rollback_script(a, CID))
    assert not Path(a.files[0].write.path).exists()


def test_a_firewall_rollback_restores_both_families(host: Path) -> None:
    a = _action(host, "firewall")
    _arm(host, a, "firewall-0a1b2c3d")
    _sh(C.rollback_script(a, "firewall-0a1b2c3d"))
    calls = _calls(host)
    assert "iptables-restore -w" in calls and "ip6tables-restore -w" in calls
    assert "systemctl daemon-reload" in calls
    assert "systemctl -q disable provision-firewall.service" in calls  # it was not enabled


def test_status_while_still_armed_is_pending_and_without_a_trace_unknown(host: Path) -> None:
    a = _action(host)
    d = _arm(host, a)
    assert C.parse_status(_sh(C.status_script(a, CID, wait=0))).result == "pending"
    (d / "armed").unlink()
    assert C.parse_status(_sh(C.status_script(a, CID, wait=0))).result == "unknown"


@pytest.mark.parametrize("round_", range(12))
def test_confirm_and_rollback_at_once_exactly_one_wins(host: Path, round_: int) -> None:
    a = _action(host)
    cid = f"sshd-{round_:08x}"
    d = _arm(host, a, cid)
    outs: dict[str, str] = {}
    go = threading.Barrier(2)

    def run(name: str, script: str) -> None:
        go.wait()
        outs[name] = _sh(script)

    threads = [threading.Thread(target=run, args=("confirm", C.confirm_script(a, cid))),
               threading.Thread(target=run, args=("rollback", C.rollback_script(a, cid)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = C.confirmed(outs["confirm"])
    content = Path(a.files[0].write.path).read_text()
    if won:
        assert content == "PasswordAuthentication no\n" and not d.exists()
        assert "ssh.service" not in _calls(host)
    else:
        assert won is False, outs
        assert content == "PasswordAuthentication yes\n"
        assert (d / "result").read_text() == "rolled-back\n"


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


def test_describe_writes_and_combined() -> None:
    a = _action(Path("/h"))
    unchanged = C.Staged(WriteFile("/h/b", "y\n"), "sshd", changed=False)
    two = C.CommitConfirmed("firewall", "gpu1", (*a.files, unchanged), "u",
                            reasons=("rules differ", "unit disabled"))
    assert two.describe() == ("firewall: commit-confirmed apply (/h/etc/50-provision.conf; "
                              "rules differ; unit disabled), rollback armed on the host")
    assert two.writes == (a.files[0].write,)
    none = C.CommitConfirmed("sshd", "gpu1", (unchanged,), "ssh.service")
    assert none.describe() == ("sshd: commit-confirmed apply (no file changes), rollback armed "
                               "on the host")
    assert none.writes == ()
    text = C.combined(["echo one", "echo two"], batch="echo batch", stop_on_error=True,
                      what="apply")
    assert "# provision: apply (2 part(s))" in text
    assert text.index("echo batch") < text.index("@commit\\t0") < text.index("echo one") \
        < text.index("@commit\\t1") < text.index("echo two")
    assert text.count("|| exit $?") == 3
    loose = C.combined(["echo one"], stop_on_error=False, what="confirm")
    assert "|| exit $?" not in loose and "batch" not in loose
    out = _sh(text)
    assert C.split_sections(out) == ("batch", ["one", "two"])


def test_file_content_travels_byte_for_byte(host: Path) -> None:
    """Content read from a file that is not UTF-8 (surrogate escapes) is staged as the
    same bytes."""
    write = WriteFile(str(host / "f"), "a\udcffb\n")
    a = C.CommitConfirmed("sshd", "gpu1", (C.Staged(write, "sshd"),), "ssh.service")
    script = C.apply_script(a, CID, 5)
    assert "Yf9iCg==" in script  # base64 of b"a\xffb\n"


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
