"""A channel to a Unix socket on the SSH server: `direct-streamlocal@openssh.com` (OpenSSH's
PROTOCOL, section 2.4), what `ssh -L PORT:/path/to.sock` opens. A member's own Jupyter
listens on such a socket (docs/tunnels.md), reached over the member's own login.

paramiko's `Transport.open_channel` writes the extra fields of the tcpip and x11 kinds only,
so this is its sequence with this kind's fields (socket path, reserved string, reserved
uint32), on the same transport internals (paramiko 3.4 to 5.x: tested against a real sshd in
the lab, tests/lab/test_team_notebooks.py).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import paramiko
from paramiko.common import cMSG_CHANNEL_OPEN
from paramiko.message import Message

KIND = "direct-streamlocal@openssh.com"


def open_streamlocal(transport: paramiko.Transport, path: str,
                     timeout: float = 10.0) -> paramiko.Channel:
    """A channel to the Unix socket `path` on the server. Raises paramiko.ChannelException
    when the server refuses it (nothing listens there, or forwarding is not allowed), and
    SSHException when the transport fails or `timeout` passes."""
    t: Any = transport  # the internals open_channel uses, which the type stubs leave out
    if not t.active:
        raise paramiko.SSHException("SSH session not active")
    with t.lock:
        window = t._sanitize_window_size(None)
        packet = t._sanitize_packet_size(None)
        chanid = t._next_channel()
        m = Message()
        m.add_byte(cMSG_CHANNEL_OPEN)
        m.add_string(KIND)
        m.add_int(chanid)
        m.add_int(window)
        m.add_int(packet)
        m.add_string(path)
        m.add_string("")  # reserved
        m.add_int(0)  # reserved
        chan: Any = paramiko.Channel(chanid)
        t._channels.put(chanid, chan)
        t.channel_events[chanid] = event = threading.Event()
        t.channels_seen[chanid] = True
        chan._set_transport(t)
        chan._set_window(window, packet)
    t._send_user_message(m)
    deadline = time.monotonic() + timeout
    while not event.wait(0.1):
        if not t.active:
            raise t.get_exception() or paramiko.SSHException("Unable to open channel.")
        if time.monotonic() > deadline:
            raise paramiko.SSHException("Timeout opening channel.")
    opened = t._channels.get(chanid)
    if isinstance(opened, paramiko.Channel):
        return opened
    raise t.get_exception() or paramiko.SSHException("Unable to open channel.")
