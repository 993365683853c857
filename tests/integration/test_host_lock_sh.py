"""The host lock's script run by a real sh here: held, released, taken over, timed out; -q
releases cleanly; a holder whose operator falls silent gives the lock up."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from provision.hosts import lock as L
from tests.unit.test_host_lock import TOKEN_A, TOKEN_B, utc  # noqa: F401 (autouse fixture)

# --- the shell side, run for real --------------------------------------------------------

@pytest.fixture
def paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return moved(tmp_path, monkeypatch)


@pytest.fixture
def open_paths(root_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The lock's paths where another account can reach them (tmp_path is under a 0700
    directory of root's)."""
    return moved(root_dir, monkeypatch)


def moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    run = tmp_path / "run"
    monkeypatch.setattr(L, "LOCK_DIR", str(run))
    monkeypatch.setattr(L, "LOCK", str(run / "converge.lock"))
    monkeypatch.setattr(L, "HOLDER", str(run / "converge.holder"))
    monkeypatch.setattr(L, "WORK", str(run / "converge.work"))
    monkeypatch.setattr(L, "STATE_DIR", str(tmp_path / "commit"))
    (tmp_path / "commit").mkdir()
    return tmp_path


PROBE = "probe_main() {\nprintf 'probe\\t1\\nend\\n'\n}\nprobe_main \"$@\"\n"


def start(spec: L.Spec) -> subprocess.Popen[str]:
    p = subprocess.Popen(["sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, bufsize=1)
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(L.script(PROBE, spec))
    p.stdin.flush()
    return p


def until_end(p: subprocess.Popen[str]) -> list[str]:
    assert p.stdout is not None
    lines = []
    for line in p.stdout:
        lines.append(line.rstrip("\n"))
        if line == "end\n":
            return lines
    raise AssertionError(f"no end: {lines}")


def test_held_released_taken_over_and_timed_out(paths: Path) -> None:
    a = start(L.Spec("alice@laptop", "apply", TOKEN_A, 5))
    got = until_end(a)
    assert L.parse(L.split("\n".join(got))[0]).acquired
    holder = (paths / "run" / "converge.holder").read_text()
    assert L.parse_holder(holder.strip("\n")) is not None
    # the guard lets the holder's own execs through, nobody else's
    ok = subprocess.run(["sh", "-s"], input=L.guard(TOKEN_A, "echo ran\n"), capture_output=True,
                        text=True)
    assert (ok.returncode, ok.stdout) == (0, "ran\n")
    other = subprocess.run(["sh", "-s"], input=L.guard(TOKEN_B, "echo ran\n"),
                           capture_output=True, text=True)
    assert other.returncode == L.GUARD_EXIT and other.stdout == ""
    assert "no longer holds the host lock" in other.stderr
    # plan sees it held and does not wait
    plan = subprocess.run(["sh", "-s"], input=L.script(PROBE, None), capture_output=True,
                          text=True, timeout=30)
    r = L.parse(L.split(plan.stdout)[0])
    assert isinstance(r.held, L.Holder) and r.held.token == TOKEN_A
    # a second apply waits (its operator still there: stdin open), then gives up naming the holder
    b = start(L.Spec("bob@desk", "apply", TOKEN_B, 3))
    assert b.stdout is not None and b.stdin is not None
    b_out = b.stdout.read()  # to the end, stdin kept open until then
    b.stdin.close()
    b.wait(timeout=30)
    rb = L.parse(L.split(b_out)[0])
    assert b.returncode == L.GUARD_EXIT and "probe\t1" not in b_out
    assert rb.timeout == "held" and isinstance(rb.busy, L.Holder) and rb.busy.by == "alice@laptop"
    # a waiter whose operator went away (its input ended) stops waiting at once, says nothing
    gone = subprocess.run(["sh", "-s"], input=L.script(PROBE, L.Spec("bob@desk", "apply", TOKEN_B,
                                                                     600)),
                          capture_output=True, text=True, timeout=60)
    rg = L.parse(L.split(gone.stdout)[0])
    assert gone.returncode == L.GUARD_EXIT and rg.busy is not None and rg.timeout == ""
    # the holder's session ends without `q`: the record says so, the next taker says so
    assert a.stdin is not None
    a.stdin.close()
    assert a.wait(timeout=30) == 0
    plan = subprocess.run(["sh", "-s"], input=L.script(PROBE, None), capture_output=True,
                          text=True, timeout=30)
    stale = L.parse(L.split(plan.stdout)[0]).stale
    assert isinstance(stale, L.Holder) and stale.state == "closed"
    c = subprocess.run(["sh", "-s"], input=L.script(PROBE, L.Spec("bob@desk", "apply", TOKEN_B, 5)),
                       capture_output=True, text=True, timeout=30)
    rc = L.parse(L.split(c.stdout)[0])
    assert rc.acquired and isinstance(rc.stale, L.Holder)
    assert (rc.stale.token, rc.stale.state) == (TOKEN_A, "closed")


def test_q_releases_cleanly_and_an_orphaned_rollback_is_set_aside(paths: Path) -> None:
    d = paths / "commit" / "sshd-0a1b2c3d"
    d.mkdir()
    (d / "armed").touch()
    (d / "armed-at").write_text("1796126470.5\n")
    p = start(L.Spec("alice@laptop", "apply", TOKEN_A, 5))
    r = L.parse(L.split("\n".join(until_end(p)))[0])
    assert p.stdin is not None
    p.stdin.write("..q")  # two heartbeats, then the release
    p.stdin.close()
    assert p.wait(timeout=30) == 0 and r.acquired and r.stale is None
    # no timer of that id runs here: it will never fire, so it is set aside, said once
    assert r.orphans == [L.Armed("sshd-0a1b2c3d", 1796126470.5)]
    assert not (d / "armed").exists() and (d / "orphaned").exists()
    assert not (paths / "run" / "converge.holder").exists()  # released: no record left


# --- wait-die over one run's hosts (provision.hosts.converge.Contention) -----------------


def test_a_holder_whose_operator_falls_silent_gives_the_lock_up(
        paths: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No heartbeat for LIFELINE seconds (the laptop gone without a FIN): the host process
    ends, the lock with it, and the record says how."""
    monkeypatch.setattr(L, "LIFELINE", 1)
    p = start(L.Spec("alice@laptop", "apply", TOKEN_A, 5))
    until_end(p)
    assert p.wait(timeout=60) == 0  # stdin still open: it ended by itself
    h = L.parse_holder((paths / "run" / "converge.holder").read_text().strip("\n"))
    assert h is not None and h.state == "silent" and h.ended is not None
    assert p.stdin is not None
    p.stdin.close()


def test_the_lock_and_its_record_are_roots_alone(paths: Path) -> None:
    import os
    import stat

    run = paths / "run"
    run.mkdir(mode=0o755)
    os.chmod(run, 0o755)
    a = start(L.Spec("alice@laptop", "apply", TOKEN_A, 5))
    until_end(a)
    try:
        assert stat.S_IMODE(run.stat().st_mode) == 0o700 and run.stat().st_uid == 0
        for name in ("converge.lock", "converge.holder", "converge.work"):
            st = (run / name).stat()
            assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600), name
    finally:
        assert a.stdin is not None
        a.stdin.write("q")
        a.stdin.close()
        a.wait(timeout=10)


def test_a_member_who_opened_the_lock_while_it_was_open_to_all_holds_nothing(
        open_paths: Path) -> None:
    """Before the lock was root's alone, any account could open it and hold its flock for
    ever. The next apply replaces that lock file: the old descriptor locks nothing."""
    import os

    run = open_paths / "run"
    run.mkdir(mode=0o755)
    os.chmod(run, 0o755)
    (run / "converge.lock").write_text("")
    os.chmod(run / "converge.lock", 0o644)
    squatter = subprocess.Popen(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "flock", "-s",
         str(run / "converge.lock"), "sleep", "60"])
    try:
        for _ in range(100):
            if "FLOCK" in Path("/proc/locks").read_text() and subprocess.run(
                    ["flock", "-n", "-x", str(run / "converge.lock"), "true"]).returncode != 0:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the squatter never held the lock")
        a = start(L.Spec("alice@laptop", "apply", TOKEN_A, 3))
        report = L.parse(L.split("\n".join(until_end(a)))[0])
        assert report.acquired and not report.contended, report
        assert a.stdin is not None
        a.stdin.write("q")
        a.stdin.close()
        a.wait(timeout=10)
        # and nobody but root opens the new one
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            "flock", "-n", "-s", str(run / "converge.lock"), "true"],
                           capture_output=True, text=True)
        assert r.returncode != 0 and "Permission denied" in r.stderr, r.stderr
    finally:
        squatter.kill()
        squatter.wait()


def test_a_holder_without_a_record_is_named_from_proc_locks(paths: Path) -> None:
    run = paths / "run"
    run.mkdir(mode=0o700)
    (run / "converge.lock").write_text("")
    holder = subprocess.Popen(["flock", "-x", str(run / "converge.lock"), "sleep", "60"])
    try:
        for _ in range(100):
            if subprocess.run(["flock", "-n", "-x", str(run / "converge.lock"), "true"]).returncode:
                break
            time.sleep(0.05)
        a = start(L.Spec("alice@laptop", "apply", TOKEN_A, 2))
        assert a.stdout is not None
        out = a.stdout.read()
        a.wait(timeout=30)
        report = L.parse(L.split(out)[0])
        assert report.timeout == "held", out
        pids = {f.pid for f in report.flockers}
        assert pids & {holder.pid, *child_pids(holder.pid)}, (out, holder.pid)
        f = report.flockers[0]
        assert (f.uid, f.account) == (0, "root") and f.command in ("flock", "sleep")
        assert L.failure(report, 2, time.time()).startswith(
            f"host lock held by a process that left no record: pid {f.pid} (uid 0 root: ")
    finally:
        holder.kill()
        holder.wait()


def child_pids(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]
