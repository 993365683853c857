"""A TCP connection made by a remote host: a `direct-tcpip` channel, as a local socket (I/O).

`provision dns migrate --health-from HOST` checks a new value from where it makes sense (a
bastion, a host in the private network). The remote sshd makes the connection itself: no
command runs on the host, so no outside text is ever put on a command line there; the
target travels in the SSH protocol's channel-open message. It needs forwarding on that
host's sshd (`AllowTcpForwarding local`, which every bastion has); a refusal is said as such.

The channel is bridged to one end of a local socket pair so that `ssl` and `http.client`,
which want a real socket, work over it unchanged.
"""

from __future__ import annotations

import contextlib
import errno
import socket
import threading
from typing import Any

import paramiko

READ = 1 << 16


def dial(transport: Any, via: str, host: str, port: int, timeout: float) -> socket.socket:
    """A socket whose bytes `via` (the host behind `transport`) exchanges with host:port.
    OSError (the sshd's own words, e.g. "Connection refused", "Network is unreachable")
    when `via` cannot connect; its strerror names `via`."""
    try:
        chan = transport.open_channel("direct-tcpip", (host, port), ("127.0.0.1", 0),
                                      timeout=timeout)
    except paramiko.ChannelException as e:
        why = e.text or f"channel open failed ({e.code})"
        if e.code == 1:  # SSH_OPEN_ADMINISTRATIVELY_PROHIBITED: sshd forwards nothing
            why += (f": {via}'s sshd does not forward (AllowTcpForwarding no, or a PermitOpen "
                    "that leaves this port out)")
        raise OSError(errno.ECONNREFUSED, f"{why} (from {via})") from None
    except (paramiko.SSHException, EOFError) as e:
        raise OSError(errno.EIO, f"{e or 'connection lost'} (from {via})") from None
    ours, theirs = socket.socketpair()
    ours.settimeout(timeout)
    threading.Thread(target=_pump, args=(theirs, chan), daemon=True,
                     name=f"dial-{via}").start()
    return ours


def _pump(sock: socket.socket, chan: Any) -> None:
    """Copy both ways until either side ends, then close both. The checks never half-close:
    our end closing closes the channel (a server that keeps the connection open, as an
    HTTP/1.1 one does, would otherwise hold it)."""
    def up() -> None:
        with contextlib.suppress(OSError, paramiko.SSHException, EOFError):
            while data := sock.recv(READ):
                chan.sendall(data)
        with contextlib.suppress(Exception):
            chan.close()

    th = threading.Thread(target=up, daemon=True)
    th.start()
    with contextlib.suppress(OSError, paramiko.SSHException, EOFError):
        while data := chan.recv(READ):
            sock.sendall(data)
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
    th.join(timeout=30)
    with contextlib.suppress(Exception):
        chan.close()
    sock.close()
