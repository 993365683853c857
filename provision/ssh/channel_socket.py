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
  cut off the others. Close refuses new calls at once, and the channel is closed when no
  call is in flight: by close itself, or else by the last call in flight as it returns.
  Close does not wait for that: the call in flight is nearly always the Transport's read,
  polling with a 0.1 s timeout, and waiting for it added 0.1 s to every host's chain close
  (to every `exec`, `plan` and `apply`). It sends EOF instead, so the far side hangs up and
  the read ends within a round trip (sshd discards data that follows an EOF; it drops the
  connection only for a packet to a channel it has freed, which needs our CLOSE). A close
  that the far
  side starts is answered by paramiko's own transport thread and stays exposed: a host
  that drops our session mid-send can still cost the shared hop, which `Gateways` then
  reopens for the hosts that come after.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

READ_ALL = 1 << 26  # more than any channel window we open: one recv takes all that is queued


class ChannelSocket:
    """Socket-like (recv, send, settimeout, close) over a paramiko Channel."""

    def __init__(self, chan: Any):
        self.chan = chan
        self.pending = bytearray()
        self._lock = threading.Lock()
        self._busy = 0
        self._closing = False

    @contextmanager
    def _in_flight(self) -> Iterator[None]:
        with self._lock:
            if self._closing:
                raise OSError(errno.EBADF, "channel closed")
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1
                last = self._closing and not self._busy
            if last:  # close came while we were in flight: it left the closing to us
                self.chan.close()

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
        with self._lock:
            if self._closing:
                return
            self._closing = True
            if self._busy:
                # the last call in flight closes the channel as it returns; our EOF makes
                # the far side hang up, which ends the Transport's waiting read at once
                # (else it lingered to its 0.1 s timeout, the host's connection with it)
                self.chan.shutdown_write()
                return
        self.chan.close()

    @property
    def _closed(self) -> bool:  # Transport.stop_thread looks at its socket's private flag
        return self._closing or bool(self.chan.closed)
