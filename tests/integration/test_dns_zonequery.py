"""`zonequery.ask_all` against loopback sockets: a server that never answers is not asked
every record (the give-up guard), and every question gets an answer, in order."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from provision.dns.propagation import Target
from provision.dns.zonequery import GIVE_UP_AFTER, ask_all


@pytest.fixture
def silent() -> Iterator[tuple[Target, list[bytes]]]:
    """A UDP socket on 127.0.0.1 that reads every query and answers none."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.1)
    got: list[bytes] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                got.append(s.recv(4096))
            except TimeoutError:
                continue

    t = threading.Thread(target=read, daemon=True)
    t.start()
    yield Target("ns-down.example.org.", "127.0.0.1", "authoritative", s.getsockname()[1]), got
    stop.set()
    t.join()
    s.close()


def test_a_server_that_never_answers_is_not_asked_every_record(
        silent: tuple[Target, list[bytes]]) -> None:
    target, received = silent
    qs = [(target, f"r{i}.example.org.", "A") for i in range(200)]
    answers = ask_all(qs, in_flight=4, timeout=0.2)
    assert list(answers) == qs and {a.status for a in answers.values()} == {"TIMEOUT"}
    skipped = [a for a in answers.values() if a.error.startswith("not asked")]
    # at most GIVE_UP_AFTER timeouts plus those already in flight when the last came back
    assert len(received) <= GIVE_UP_AFTER + 4 < len(qs), len(received)
    assert len(skipped) == len(qs) - len(received)
