"""`provision exec` decisions (pure): the remote command line, stopping it, the output cap."""

from __future__ import annotations

from provision.ssh.exec_plan import (
    Capped,
    Result,
    exit_code,
    kill_command,
    prefixed,
    remote_command,
    split_pgid,
    status_of,
)


def test_the_remote_line_prints_the_session_pid_first() -> None:
    assert remote_command("uptime", sudo=False) == "echo $$; uptime"
    assert remote_command("echo 'a b' | wc -c", sudo=True) == \
        "echo $$; sudo -n -- sh -c 'echo '\"'\"'a b'\"'\"' | wc -c'"


def test_kill_targets_the_process_group() -> None:
    assert kill_command(4242, sudo=False) == "kill -TERM -- -4242"
    assert kill_command(4242, sudo=True) == "sudo -n kill -TERM -- -4242"


def test_the_pid_line_is_split_off_once_complete() -> None:
    assert split_pgid(b"12") == (None, b"12")
    assert split_pgid(b"123\nhello\n") == (123, b"hello\n")
    assert split_pgid(b"not a pid\n") == (None, b"not a pid\n")


def test_the_cap_keeps_the_start_and_counts_the_rest() -> None:
    c = Capped(5)
    for chunk in (b"abc", b"defg", b"hij"):
        c.add(chunk)
    assert (bytes(c.kept), c.total, c.cut) == (b"abcde", 10, True)
    small = Capped(5)
    small.add(b"abcde")
    assert not small.cut and small.text() == "abcde"


def test_status_and_exit_code() -> None:
    assert status_of(0, False, False) == "ok"
    assert status_of(2, False, False) == "failed"
    assert status_of(None, True, False) == "timeout"
    assert status_of(None, True, True) == "interrupted"
    ok, bad = Result("a", "ok", 0, 0.1), Result("b", "unreachable", None, 0.1, error="x")
    assert exit_code([ok]) == 0 and exit_code([ok, bad]) == 1 and exit_code([]) == 1


def test_stream_lines_are_prefixed_and_aligned() -> None:
    assert prefixed("gpu1", "a\nb", 7, "out") == ["gpu1    | a", "gpu1    | b"]
    assert prefixed("bastion", "oops", 7, "err") == ["bastion ! oops"]


def test_the_note_says_what_was_cut() -> None:
    r = Result("a", "ok", 0, 0.1, "x" * 10, "", 300, 0, True, False)
    assert r.note(10) == "stdout cut at 10 of 300 bytes"
    assert r.as_dict()["stdout_truncated"] is True and r.as_dict()["stdout_bytes"] == 300
