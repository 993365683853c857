"""A paramiko Channel as the socket under the next hop's Transport (I/O).

Both jump chains ride on this: converge's hosts behind a shared bastion transport
(`provision.ssh.connect.Gateways`) and the paramiko tunnel backend. It fixes two things the
bare Channel gets wrong as a socket:

- **Reads.** paramiko's Packetizer reads a packet a few bytes at a time, and a Channel hands
  bytes out with `del array[:n]`, which moves everything queued behind them. Once the outer
  hop runs ahead the buffer holds megabytes and each small read moves them all (a tunnel
  fell from 25 to 5 MB/s within three downloads). We take the whole buffer in one read and
  serve the pieces from a bytearray, whose front deletes are O(1).
- **Close racing a send.** Channel.send and Channel.close each build their message under the
  channel's lock but hand it to the transport after releasing it, so a DATA or
  WINDOW_ADJUST built just before a CLOSE can leave after it. sshd then finds a data packet
  for a channel it has freed and drops the whole connection ("data packet referred to
  nonexistent channel"): with a bastion transport shared by 32 hosts, one host finishing
  cut off the others. Close wakes a blocked read, waits for the calls in flight and
  refuses new ones before it closes the channel. A close that the far
  side starts is answered by paramiko's own transport thread and stays exposed: a host
  that drops our session mid-send can still cost the shared hop, which `Gateways` then
  reopens for the hosts that come after.
- **A close the far side has not let go of.** Channel.close sends CLOSE and returns; sshd
  on the bastion shuts its socket to the next host when it handles that message, and only
  then answers with a CLOSE of its own. Until the answer the bastion still carries the
  host's connection: a fork slot freed before it let the bastion hold one more host's TCP
  connection than `--forks` allows, for about a round trip. Close waits (bounded) for the
  answer.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

READ_ALL = 1 << 26  # more than any channel window we open: one recv takes all that is queued
CLOSE_DRAIN = 2.0  # seconds close waits for calls in flight (each ends within its timeout)
RELEASE_WAIT = 1.0  # seconds close waits for the far side's CLOSE (one round trip, usually)


class ChannelSocket:
    """Socket-like (recv, send, settimeout, close) over a paramiko Channel."""

    def __init__(self, chan: Any):
        self.chan = chan
        self.pending = bytearray()
        self._cv = threading.Condition()
        self._busy = 0
        self._closing = False
        self._released = False  # the close is done: the far side answered (or was waited for)

    @contextmanager
    def _in_flight(self) -> Iterator[None]:
        with self._cv:
            if self._closing:
                raise OSError(errno.EBADF, "channel closed")
            self._busy += 1
        try:
            yield
        finally:
            with self._cv:
                self._busy -= 1
                if not self._busy:
                    self._cv.notify_all()

    def recv(self, n: int) -> bytes:
        if not self.pending:
            with self._in_flight():
                data: bytes = self.chan.recv(READ_ALL)  # raises socket.timeout like a socket
            if len(data) <= n:
                return data
            self.pending += data
        out = bytes(self.pending[:n])
        del self.pending[:n]
        return out

    def send(self, data: bytes) -> int:
        with self._in_flight():
            sent: int = self.chan.send(data)
        return sent

    def settimeout(self, timeout: float | None) -> None:
        self.chan.settimeout(timeout)

    def close(self) -> None:
        """Close the channel once the calls in flight end, and return when the far side
        has let go of it; a second close (the next hop's transport thread and its owner
        both close) returns no earlier than the first."""
        with self._cv:
            if self._closing:
                self._cv.wait_for(lambda: self._released, timeout=CLOSE_DRAIN + RELEASE_WAIT)
                return
            self._closing = True
            # A recv blocked on the channel (the next hop's transport thread, until its
            # 0.1 s poll) returns at once: what is queued, else b"" (the hop's EOF). An
            # empty read sends no window adjust; one that got data may, and is waited for.
            self.chan.in_buffer.close()
            self._cv.wait_for(lambda: self._busy == 0, timeout=CLOSE_DRAIN)
        try:
            self.chan.close()
            self._wait_released()
        finally:
            with self._cv:
                self._released = True
                self._cv.notify_all()

    def _wait_released(self) -> None:
        # paramiko unlinks a channel from its transport when the far side's CLOSE arrives
        # (Channel._handle_close) and signals nothing then, so this polls the transport's
        # channel map; a channel without a transport (or a transport gone) has nothing to wait
        transport = getattr(self.chan, "transport", None)
        if transport is None or transport is threading.current_thread():  # it reads the answer
            return
        chanid, deadline = self.chan.chanid, time.monotonic() + RELEASE_WAIT
        while (transport.is_active() and transport._channels.get(chanid) is self.chan
               and time.monotonic() < deadline):
            time.sleep(0.0005)

    @property
    def _closed(self) -> bool:  # Transport.stop_thread looks at its socket's private flag
        return self._closing or bool(self.chan.closed)
