"""The commit-confirmed rollback/confirm race (provision.steps.commit), proven by running
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

from provision.steps import commit as C
from provision.steps.actions import WriteFile
from tests.unit.test_guards_commit import CID, _action

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")


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
