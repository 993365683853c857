"""The converge's progress model and Ctrl-C's words (provision.hosts.progress,
provision.hosts.interrupt), fed with the event streams of tests/fixtures/progress/."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.commands.live import render_lines
from provision.hosts.interrupt import EXIT_INTERRUPTED, Stop, stopping
from provision.hosts.progress import (
    Board,
    Event,
    describe,
    from_batch_line,
    leaving_lines,
    stopping_line,
)
from provision.ssh.session import _lines

CASES = yaml.safe_load((Path(__file__).parent.parent / "fixtures" / "progress"
                        / "streams.yml").read_text())


def fed(case: dict[str, Any]) -> Board:
    board = Board(case["hosts"])
    for host, kind, *fields in case["events"]:
        board.feed(Event(host, kind, **(fields[0] if fields else {})))
    return board


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_event_streams(case: dict[str, Any]) -> None:
    board = fed(case)
    states = board.snapshot()
    assert {s.host: describe(s, case["now"]) for s in states} == case["describe"]
    if "stopping" in case:
        assert stopping_line(states, case["now"]) == case["stopping"]
    if "leaving" in case:
        assert [x.strip() for x in leaving_lines(states, case["now"])] == case["leaving"]


def test_the_display_lists_hosts_in_flight_and_counts_the_rest() -> None:
    board = fed(CASES[0])
    assert render_lines(board, "applying", 100) == [
        "applying: 1/3 hosts done, 2 in flight",
        "  gpu1  running the batch, step 2 of 3: apt-get install iperf3",
        "  gpu2  connecting"]


@pytest.mark.parametrize(("line", "want"), [
    ("@step\t2", Event("h", "step", step=2, steps=3, detail="c")),
    ("@step\t7", Event("h", "step", step=7, steps=3)),  # more than planned: no description
    ("@wait\tdpkg-lock\tapt (pid 9, /var/lib/dpkg/lock)",
     Event("h", "dpkg-lock", detail="apt (pid 9, /var/lib/dpkg/lock)")),
    ("@step\t-1", None), ("@step\tx", None), ("@step", None), ("@wait\tother\tx", None),
    ("@done", None), ("@settled\tunit\tearly", None), ("anything", None),
])
def test_batch_lines(line: str, want: Event | None) -> None:
    assert from_batch_line("h", line, ["a", "b", "c"]) == want


def test_a_host_line_is_cut_before_it_is_kept() -> None:
    e = from_batch_line("h", "@wait\tdpkg-lock\t" + "x" * 5000, [])
    assert e is not None and len(e.detail) == 200


def test_unknown_event_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown progress event"):
        Event("h", "teleporting")


def test_stdout_lines_reach_the_listener_whole_across_reads() -> None:
    got: list[str] = []
    out: list[bytes] = [b"@st"]
    seen = _lines(out, 0, got.append)
    assert (seen, got) == (0, [])
    out.append(b"ep\t0\n@step\t1")
    seen = _lines(out, seen, got.append)
    out.append(b"\n@done\n")
    seen = _lines(out, seen, got.append)
    assert got == ["@step\t0", "@step\t1", "@done"] and seen == len(b"".join(out))


class Left(Exception):
    pass


def test_first_press_stops_and_says_so_second_leaves_with_what_is_half_way() -> None:
    board = fed(CASES[2])
    said: list[str] = []
    codes: list[int] = []

    def leave(code: int) -> None:
        codes.append(code)
        raise Left

    stop = Stop(board, said.append, leave=leave, clock=lambda: 100.0)
    stop.press()
    assert stop.requested and codes == []
    assert said == [CASES[2]["stopping"]]
    with pytest.raises(Left):
        stop.press()
    assert codes == [EXIT_INTERRUPTED]
    assert [x.strip() for x in said[1:]] == CASES[2]["leaving"]


def test_the_handler_is_sigint_inside_the_block_only() -> None:
    before = signal.getsignal(signal.SIGINT)
    stop = Stop(Board(["h"]), lambda _: None)
    with stopping(stop):
        assert signal.getsignal(signal.SIGINT) == stop.press
        signal.raise_signal(signal.SIGINT)  # the real signal, delivered to this process
        assert stop.requested
    assert signal.getsignal(signal.SIGINT) is before
