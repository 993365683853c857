"""ChannelSocket: the inner hop of a paramiko jump chain reads the outer channel in gulps.

The bug it fixes: paramiko's Packetizer reads a packet in pieces of a few bytes, and each
piece taken from a Channel's buffer moved every byte queued behind it; with megabytes queued
the tunnel fell to 5 MB/s. These tests use real paramiko Channels (no transport: data is
fed the way the transport thread feeds it) and count what the buffer is asked for.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time

import paramiko
import pytest

from provision.ssh.channel_socket import RELEASE_WAIT, ChannelSocket
from provision.tunnel.paramiko_backend import WINDOW


class CountingPipe(paramiko.buffered_pipe.BufferedPipe):
    """The Channel's own buffer, counting the reads taken from it."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def read(self, nbytes: int, timeout: float | None = None) -> bytes:
        self.reads += 1
        out: bytes = super().read(nbytes, timeout)
        return out


def channel_with(data: bytes) -> tuple[paramiko.Channel, CountingPipe]:
    chan = paramiko.Channel(1)
    pipe = CountingPipe()
    chan.in_buffer = pipe
    for i in range(0, len(data), 32 * 1024):  # as the transport feeds it: packet by packet
        pipe.feed(data[i:i + 32 * 1024])
    return chan, pipe


def packetizer_reads(sock: ChannelSocket, total: int) -> bytes:
    """Read the way paramiko's Packetizer does: a 4-byte length, a 12-byte block, the rest."""
    out = bytearray()
    sizes = [4, 12, 32 * 1024 + 20]
    i = 0
    while len(out) < total:
        want = min(sizes[i % 3], total - len(out))
        got = b""
        while len(got) < want:
            got += sock.recv(want - len(got))
        out += got
        i += 1
    return bytes(out)


def test_a_backlog_is_taken_in_one_read_and_served_intact() -> None:
    data = os.urandom(WINDOW)  # a whole window queued: the outer hop ran ahead
    chan, pipe = channel_with(data)
    sock = ChannelSocket(chan)
    got = packetizer_reads(sock, len(data))
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
    # read piece by piece from the Channel this took ~380 reads, each moving the rest of
    # the 4 MiB buffer; one gulp copies each byte a fixed number of times
    assert pipe.reads == 1


def test_reads_smaller_than_a_request_pass_straight_through() -> None:
    chan, pipe = channel_with(b"SSH-2.0-OpenSSH_9.2\r\n")
    sock = ChannelSocket(chan)
    assert sock.recv(128) == b"SSH-2.0-OpenSSH_9.2\r\n"
    assert pipe.reads == 1 and not sock.pending


def test_eof_and_timeout_behave_like_a_socket() -> None:
    chan, pipe = channel_with(b"abc")
    sock = ChannelSocket(chan)
    sock.settimeout(0.01)
    assert sock.recv(2) == b"ab"
    assert sock.recv(2) == b"c"
    with pytest.raises(socket.timeout):  # the Packetizer polls its closed flag on timeouts
        sock.recv(2)
    pipe.close()
    assert sock.recv(2) == b""
    assert not sock._closed
    chan.closed = True
    assert sock._closed


class SlowChannel:
    """The parts of a Channel that ChannelSocket calls, recording their order; send blocks
    until released, like a send that has built its DATA message and not yet handed it on."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.release = threading.Event()
        self.closed = False
        self.in_buffer = paramiko.buffered_pipe.BufferedPipe()

    def send(self, data: bytes) -> int:
        self.events.append("send begins")
        self.release.wait(5)
        self.events.append("send ends")
        return len(data)

    def recv(self, n: int) -> bytes:
        raise AssertionError("not used here")

    def settimeout(self, timeout: float | None) -> None:
        pass

    def close(self) -> None:
        self.events.append("close")
        self.closed = True


def test_close_waits_for_a_send_in_flight_and_refuses_later_ones() -> None:
    """A CLOSE must never overtake a DATA: sshd drops the whole connection (and with it every
    host sharing the bastion) on a data packet for a channel it has freed."""
    chan = SlowChannel()
    sock = ChannelSocket(chan)
    sender = threading.Thread(target=sock.send, args=(b"x",))
    sender.start()
    while "send begins" not in chan.events:
        time.sleep(0.001)
    closer = threading.Thread(target=sock.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive() and chan.events == ["send begins"]  # close is waiting
    chan.release.set()
    sender.join(5)
    closer.join(5)
    assert chan.events == ["send begins", "send ends", "close"]
    assert sock._closed
    with pytest.raises(OSError):
        sock.send(b"late")
    assert chan.events == ["send begins", "send ends", "close"]
    sock.close()  # a second close is a no-op
    assert chan.events.count("close") == 1


def test_close_wakes_a_blocked_read_at_once() -> None:
    """The next hop's transport thread sits in recv until its poll times out (0.1 s in
    paramiko; 30 s here): close must not wait that out, and the read ends as EOF."""
    chan, _ = channel_with(b"")
    sock = ChannelSocket(chan)
    sock.settimeout(30)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(sock.recv(4)))
    reader.start()
    deadline = time.monotonic() + 10
    while not sock._busy and time.monotonic() < deadline:  # the read is on the channel
        time.sleep(0.001)
    assert sock._busy == 1 and reader.is_alive()
    closer = threading.Thread(target=sock.close)
    closer.start()
    closer.join(5)
    reader.join(5)
    assert not closer.is_alive() and not reader.is_alive()
    assert got == [b""] and sock._closed


class AnsweringTransport(threading.Thread):
    """The parts of a paramiko Transport that close looks at: its channel map, from which
    the far side's CLOSE (read on this thread) unlinks the channel `answer_after` seconds
    after ours was sent, or never (None)."""

    def __init__(self, answer_after: float | None) -> None:
        super().__init__(daemon=True)
        self._channels = paramiko.transport.ChannelMap()
        self.answer_after = answer_after
        self.closed_at = threading.Event()
        self.answered_at = 0.0

    def is_active(self) -> bool:
        return True

    def run(self) -> None:
        self.closed_at.wait(5)
        if self.answer_after is not None:
            time.sleep(self.answer_after)
            self.answered_at = time.monotonic()
            self._channels.delete(1)


class AnsweredChannel(SlowChannel):
    def __init__(self, transport: AnsweringTransport) -> None:
        super().__init__()
        self.transport, self.chanid = transport, 1
        transport._channels.put(1, self)

    def close(self) -> None:
        super().close()
        self.transport.closed_at.set()


def test_close_returns_once_the_far_side_has_let_go() -> None:
    """sshd on a bastion shuts its connection to the next host when it handles our CLOSE and
    answers after: a close that returned before the answer freed a fork slot while the
    bastion still carried the host (`--forks 2` seen as 3 connections there)."""
    transport = AnsweringTransport(answer_after=0.2)
    transport.start()
    sock = ChannelSocket(AnsweredChannel(transport))
    sock.close()
    returned = time.monotonic()
    assert transport.answered_at and returned >= transport.answered_at
    assert transport._channels.get(1) is None


def test_close_gives_up_on_a_far_side_that_never_answers() -> None:
    transport = AnsweringTransport(answer_after=None)
    transport.start()
    chan = AnsweredChannel(transport)
    sock = ChannelSocket(chan)
    started = time.monotonic()
    sock.close()
    waited = time.monotonic() - started
    assert chan.events == ["close"] and RELEASE_WAIT <= waited < RELEASE_WAIT + 1


def test_a_second_close_returns_no_earlier_than_the_first() -> None:
    """The next hop's transport thread and its owner both close the socket; the owner's
    close (which frees the fork slot) came second and returned at once, while the first
    still waited for the bastion's answer."""
    transport = AnsweringTransport(answer_after=0.2)
    transport.start()
    sock = ChannelSocket(AnsweredChannel(transport))
    first = threading.Thread(target=sock.close)
    first.start()
    transport.closed_at.wait(5)
    sock.close()
    returned = time.monotonic()
    first.join(5)
    assert transport.answered_at and returned >= transport.answered_at
