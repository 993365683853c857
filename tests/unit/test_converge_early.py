"""plan/apply start connecting before they import the rest of the run: to the first
`--forks` hosts only, and every chain no host's worker took up is closed."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest

from provision.hosts import run as C


class Named:
    def __init__(self, name: str) -> None:
        self.name = name


class FakeChain:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_only_the_first_forks_hosts_are_connected_early(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []

    def fake_connecting(inv: Any, host: Any, accept_new: bool, gateways: Any) -> Future[Any]:
        started.append(host.name)
        return Future()

    monkeypatch.setattr(C, "connecting", fake_connecting)
    hosts = tuple(Named(f"h{i}") for i in range(5))
    job = C.Run(inv=None, pb=None, selected=hosts)  # type: ignore[arg-type]
    early = C._connect_first(job, 2, False, None)  # type: ignore[arg-type]
    assert started == ["h0", "h1"] and list(early) == ["h0", "h1"]


def test_chains_left_over_are_closed_now_or_when_they_open() -> None:
    done, later, failed = Future[Any](), Future[Any](), Future[Any]()
    a, b = FakeChain(), FakeChain()
    done.set_result(a)
    C._drop({"a": done, "b": later, "c": failed})
    assert a.closed == 1
    later.set_result(b)  # still connecting when the run stopped: closed once it opens
    assert b.closed == 1
    failed.set_exception(OSError("refused"))  # nothing to close, nothing raised


def test_closing_waits_for_background_closes_and_does_the_others_at_once() -> None:
    from provision.hosts.reach import Closing

    order: list[str] = []
    gate = threading.Event()

    def slow() -> None:
        gate.wait(5)
        order.append("background")

    closing = Closing()
    closing.close(slow, background=True)
    closing.close(lambda: order.append("now"), background=False)
    assert order == ["now"]  # the foreground one did not wait for the background one
    gate.set()
    closing.wait()
    assert order == ["now", "background"]
