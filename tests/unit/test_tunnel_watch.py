"""The tunnel keeps watching who listens on the loopback ports it forwards to (issue 34):
another account that takes a service's port while the service restarts gets no browser
traffic; the forward stops, and resumes when the service's own account listens again. A
member's server on its Unix socket needs no watching. Session over a stand-in backend."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from provision.inventory import load_inventory
from provision.inventory.forwards import forward_for
from provision.tunnel.session import Session
from provision.tunnel.tokens import PROBE_BEGIN

INV = Path(__file__).parent.parent / "fixtures" / "member_servers" / "inventory.yml"


class Backend:
    name = "fake"

    def __init__(self) -> None:
        self.answers: list[str] = []
        self.ran: list[str] = []
        self.holds: list[tuple[str, bool]] = []

    def connect(self, timeout: float = 10.0) -> None: ...
    def alive(self) -> str | None: return None
    def disconnect(self) -> None: ...
    def probe(self, fwd: object, timeout: float = 5.0) -> bool | None: return None
    def close(self) -> None: ...

    def run(self, command: str, timeout: float = 20.0) -> tuple[int, str]:
        self.ran.append(command)
        return 0, self.answers.pop(0)

    def hold(self, fwd: object, held: bool) -> None:
        self.holds.append((fwd.service, held))  # type: ignore[attr-defined]


def owners(name: str, text: str) -> str:
    return f"{PROBE_BEGIN} {name} owners\n{text}\n"


def session() -> tuple[Session, Backend, list[str]]:
    inv = load_inventory(INV)
    gpu1 = inv.node("gpu1")
    board = next(s for s in gpu1.services if s.name == "tensorboard")
    bob = dataclasses.replace(next(s for s in gpu1.services if s.member == "bob"))  # on a socket
    services = [board, bob]
    said: list[str] = []
    backend = Backend()
    return (Session(backend, gpu1, services, [forward_for(s) for s in services], "bob", 5,
                    said.append), backend, said)


def test_a_port_taken_while_its_service_restarts_stops_the_forward_until_it_is_back() -> None:
    s, backend, said = session()
    backend.answers = [owners("tensorboard", "990 990"), owners("tensorboard", "990 1002"),
                       owners("tensorboard", "990 1002"), owners("tensorboard", "990 990")]
    s.watch()
    assert backend.holds == []
    s.watch()
    assert backend.holds == [("tensorboard", True)]
    assert said == ["gpu1: tensorboard: not forwarded: port 6006 on the host is held by uid "
                    "1002, not svc-tensorboard (another account listening in its place would "
                    "get what the browser sends)"]
    s.watch()  # still held: said once
    assert backend.holds == [("tensorboard", True)] and len(said) == 1
    s.watch()
    assert backend.holds == [("tensorboard", True), ("tensorboard", False)]
    assert said[-1] == "gpu1: tensorboard: forwarded again: port 6006 is svc-tensorboard's again"
    # only the port is watched: bob's server is on a socket in a directory of his
    assert all("jupyter@bob" not in c for c in backend.ran)
    assert all("6006" not in c or "id -u -- svc-tensorboard" in c for c in backend.ran)


def test_nothing_is_held_when_the_host_says_nothing_usable() -> None:
    s, backend, said = session()
    backend.answers = [owners("tensorboard", "x 1002"), ""]
    s.watch()
    s.watch()
    assert backend.holds == [] and said == []
