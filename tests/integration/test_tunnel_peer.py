"""The paramiko tunnel lets only the operator's own account use its local forwards: the
kernel's table of TCP sockets (/proc/net/tcp) names the account of a connecting socket
(issue 34: another local account fetched TensorBoard through a teammate's tunnel)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from provision.inventory.forwards import peer_uid


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/proc/net/tcp").exists()
                    or not Path("/usr/bin/python3").exists(),
                    reason="connects as another account (root, /usr/bin/python3 and Linux's /proc/net/tcp)")
def test_the_account_behind_a_local_connection_is_known() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        for uid in (65534, 0):
            client = subprocess.Popen(
                ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "/usr/bin/python3", "-c",
                 "import socket, sys, time; s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); "
                 "time.sleep(30)", str(port)])
            try:
                listener.settimeout(10)
                conn, addr = listener.accept()
                with conn:
                    assert peer_uid(Path("/proc/net/tcp").read_text(), addr, port) == uid
            finally:
                client.kill()
                client.wait()


def test_a_table_line_that_is_not_the_connection_names_nobody() -> None:
    head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
    line = "   0: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1002 0 1 1\n"
    assert peer_uid(head + line, ("127.0.0.1", 0x9C40), 0x1F90) == 1002
    assert peer_uid(head + line, ("127.0.0.1", 0x9C41), 0x1F90) is None
    assert peer_uid(head + line, ("127.0.0.2", 0x9C40), 0x1F90) is None
