"""`provision exec` decisions (pure): the remote command line, stopping it, the output cap."""

from __future__ import annotations

import shlex

import pytest

from provision.ssh.exec_plan import (
    NO_MARKER,
    STOP_SCRIPT,
    Capped,
    Marker,
    Result,
    Stop,
    exit_code,
    prefixed,
    remote_command,
    status_of,
    stop_command,
    stop_note,
    stop_outcome,
    stop_refusal,
)

NONCE = "0123456789abcdef" * 2
TAG = f"provision-exec-{NONCE}"


def test_the_remote_line_marks_the_group_then_runs_the_command_in_its_place() -> None:
    assert remote_command("uptime", sudo=False, nonce=NONCE) == (
        f"exec env PROVISION_EXEC={NONCE} sh -c 'printf \"%s %s\\n\" \"$0\" \"$$\"; "
        f"exec \"${{SHELL:-/bin/sh}}\" -c \"$1\"' {TAG} uptime")
    line = remote_command("echo 'a b' | wc -c", sudo=True, nonce=NONCE)
    assert line.endswith(f"{TAG} sudo -n -- env PROVISION_EXEC={NONCE} sh -c "
                         "'echo '\"'\"'a b'\"'\"' | wc -c'")
    # the command is one quoted word of the line: nothing of it is read as the line's own
    assert shlex.split(line)[-8:] == ["sudo", "-n", "--", "env", f"PROVISION_EXEC={NONCE}",
                                      "sh", "-c", "echo 'a b' | wc -c"]


@pytest.mark.parametrize("nonce", ["", "12", "ab; rm -rf /", "ABCDEF0123456789ab", "g" * 32])
def test_a_nonce_is_lowercase_hex_only(nonce: str) -> None:
    """It is written into shell text unquoted."""
    with pytest.raises(ValueError, match="not a nonce"):
        remote_command("true", sudo=False, nonce=nonce)
    with pytest.raises(ValueError, match="not a nonce"):
        stop_command(4242, nonce, sudo=False)


def test_the_stop_checks_on_the_host_then_signals_the_group() -> None:
    assert shlex.split(stop_command(4242, NONCE, sudo=False)) == [
        "sh", "-c", STOP_SCRIPT, "provision-stop", "4242", NONCE]
    assert shlex.split(stop_command(4242, NONCE, sudo=True))[:3] == ["sudo", "-n", "sh"]
    # the signal goes to the group, after the checks: 0, 1 and the stop's own group refused,
    # the leader's (or a member's) environ must carry this run's nonce
    assert 'kill -TERM "-$p"' in STOP_SCRIPT
    assert "''|*[!0-9]*|0|1)" in STOP_SCRIPT and "grp $$" in STOP_SCRIPT
    assert STOP_SCRIPT.index("ours") < STOP_SCRIPT.index("kill -TERM")
    assert 'grep -qxF "PROVISION_EXEC=$n"' in STOP_SCRIPT


# --- the marker: the only line of the host's stdout that names a group ---------------------

def _feed(chunks: list[bytes]) -> tuple[int | None, bytes]:
    m = Marker(NONCE)
    out = b"".join(m.feed(c) for c in chunks) + m.end()
    return m.pgid, out


def test_the_marker_is_taken_out_and_its_group_read() -> None:
    assert _feed([f"{TAG} 4242\nhello\n".encode()]) == (4242, b"hello\n")


@pytest.mark.parametrize("before", [b"1\n", b"0\n", b"123\n", b"Welcome\n", b"no newline: ",
                                    b"\x1b]52;c;cm0gLXJmIH4K\x07\n", b"a\nb\n" * 1000])
def test_what_the_host_prints_before_the_marker_is_output_never_the_group(before: bytes) -> None:
    """Before: the first stdout line was the group (`1`: `kill -TERM -- -1`), and anything
    else there turned the stop off."""
    assert _feed([before + f"{TAG} 4242\nout\n".encode()]) == (4242, before + b"out\n")


def test_the_marker_split_anywhere_is_still_found() -> None:
    data = f"rc says hi\n{TAG} 4242\nout\n".encode()
    for cut in range(1, len(data)):
        assert _feed([data[:cut], data[cut:]]) == (4242, b"rc says hi\nout\n"), cut
    one_by_one = [data[i:i + 1] for i in range(len(data))]
    assert _feed(one_by_one) == (4242, b"rc says hi\nout\n")


@pytest.mark.parametrize("text", [
    b"4242\n",  # the old pid line
    b"provision-exec-" + b"f" * 32 + b" 4242\n",  # another run's nonce
    f"{TAG} 4242".encode(),  # never completed
    f"{TAG} 12345678901\n".encode(),  # more digits than a pid has
    f"{TAG} -1\n".encode(),
    f"{TAG}  4242\n".encode(),
    f"{TAG} 4242 \n".encode(),
    f"{TAG.upper()} 4242\n".encode(),
])
def test_no_marker_no_group_and_every_byte_is_output(text: bytes) -> None:
    assert _feed([text, b"tail\n"]) == (None, text + b"tail\n")


def test_only_the_first_marker_counts_and_a_later_one_is_output() -> None:
    later = f"{TAG} 1\n".encode()
    assert _feed([f"{TAG} 4242\n".encode(), later]) == (4242, later)


def test_the_held_back_tail_is_bounded() -> None:
    """Output that could still become the marker is held, never more than the marker."""
    m = Marker(NONCE)
    assert m.feed(b"x" * 100_000) == b"x" * 100_000
    assert m.feed(b"y" * 10 + TAG[:20].encode()) == b"y" * 10
    assert m.end() == TAG[:20].encode()


# --- what came of the stop ------------------------------------------------------------------

def test_groups_never_asked_for() -> None:
    assert stop_refusal(None) == NO_MARKER
    assert stop_refusal(0) == "the host named process group 0, which is never signalled"
    assert stop_refusal(1) == "the host named process group 1, which is never signalled"
    assert stop_refusal(2) is None and stop_refusal(4242) is None


@pytest.mark.parametrize(("status", "stderr", "stop"), [
    (0, "", Stop("stopped")),
    (4, "", Stop("ended")),
    (3, "process group 9 is not this run's (its leader lacks the run's mark)\n",
     Stop("not stopped", "the host refused: process group 9 is not this run's (its leader "
                         "lacks the run's mark)")),
    (5, "kill: (-9) - Operation not permitted\n",
     Stop("not stopped", "kill failed: kill: (-9) - Operation not permitted")),
    (1, "sudo: a password is required\n",
     Stop("not stopped", "the stop command exited 1: sudo: a password is required")),
    (127, "", Stop("not stopped", "the stop command exited 127")),
    (None, "", Stop("not stopped", "no answer from the host to the stop command")),
])
def test_the_stop_commands_answer(status: int | None, stderr: str, stop: Stop) -> None:
    """Before, any exit 1 (sudo refusing, kill not permitted) read as "the group was gone"
    and the recap still said the command was stopped."""
    assert stop_outcome(status, stderr) == stop


def test_the_note_says_what_came_of_the_stop() -> None:
    assert stop_note("timed out", Stop("stopped")) == "timed out: stopped"
    assert stop_note("interrupted", Stop("not stopped", "why")) == (
        "interrupted: not stopped: why; it may still be running on the host")
    assert stop_note("timed out", Stop("ended")) == (
        "timed out, but it had ended on its own: nothing was signalled")
    assert stop_note("timed out", Stop("ended", "what it left running was stopped")) == (
        "timed out, but it had ended on its own; what it left running was stopped")


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
    assert status_of(None, True, False, Stop("stopped")) == "timeout"
    assert status_of(None, False, True, Stop("not stopped", "why")) == "interrupted"
    # it had ended on its own when the stop came: its exit status says how it went
    assert status_of(0, True, False, Stop("ended")) == "ok"
    assert status_of(3, False, True, Stop("ended")) == "failed"
    assert status_of(None, True, False, Stop("ended")) == "failed"
    ok, bad = Result("a", "ok", 0, 0.1), Result("b", "unreachable", None, 0.1, error="x")
    assert exit_code([ok]) == 0 and exit_code([ok, bad]) == 1 and exit_code([]) == 1


def test_stream_lines_are_prefixed_and_aligned() -> None:
    assert prefixed("gpu1", "a\nb", 7, "out") == ["gpu1    | a", "gpu1    | b"]
    assert prefixed("bastion", "oops", 7, "err") == ["bastion ! oops"]


def test_the_note_says_what_was_cut() -> None:
    r = Result("a", "ok", 0, 0.1, "x" * 10, "", 300, 0, True, False)
    assert r.note(10) == "stdout cut at 10 of 300 bytes"
    assert r.as_dict()["stdout_truncated"] is True and r.as_dict()["stdout_bytes"] == 300
    assert r.as_dict()["stop"] is None  # no stop was asked for
    t = Result("a", "timeout", None, 1.0, error="timed out: not stopped: why", stop="not stopped")
    assert t.as_dict()["stop"] == "not stopped" and t.note(10) == "timed out: not stopped: why"
