"""`QuickAckSocket`: after each read the connection ACKs at once. sshd leaves Nagle on for
an exec without a terminal, so its last small write waits for our ACK, which Linux delays
by 40 ms once a connection trades requests and answers (its "ping-pong" mode). The test
reads the kernel's own state (getsockopt TCP_QUICKACK), not a clock, and shows that a
plain socket in the same exchange does fall into delayed ACKs."""

from __future__ import annotations

import socket

import pytest

from provision.ssh.link import QUICKACK, QuickAckSocket, quickack

pytestmark = pytest.mark.skipif(QUICKACK is None, reason="TCP_QUICKACK is Linux's")


def exchange(client: socket.socket, server: socket.socket, rounds: int = 12) -> list[int]:
    """Requests and prompt answers; the client's quick-ACK state after each read."""
    assert QUICKACK is not None
    states = []
    for _ in range(rounds):
        client.sendall(b"q" * 16)
        server.recv(64)
        server.sendall(b"a" * 3000)
        got = 0
        while got < 3000:
            got += len(client.recv(65536))
        states.append(client.getsockopt(socket.IPPROTO_TCP, QUICKACK))
    return states


def pair(wrap: bool) -> tuple[socket.socket, socket.socket]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.create_connection(listener.getsockname(), timeout=10)
        server, _ = listener.accept()
    return (quickack(client) if wrap else client), server


def test_a_plain_socket_falls_into_delayed_acks() -> None:
    client, server = pair(wrap=False)
    with client, server:
        assert 0 in exchange(client, server)


def test_a_quickack_socket_acks_at_once_after_every_read() -> None:
    client, server = pair(wrap=True)
    with client, server:
        assert isinstance(client, QuickAckSocket) and client.gettimeout() == 10
        assert exchange(client, server) == [1] * 12


def test_wrapping_keeps_the_connection() -> None:
    client, server = pair(wrap=True)
    with client, server:
        client.sendall(b"ping")
        assert server.recv(4) == b"ping"
        assert quickack(client) is client  # wrapped once
