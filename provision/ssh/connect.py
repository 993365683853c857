"""SSH connections from the inventory (I/O): a `provision.ssh.link.Link` per host, through its
bastions: hops shared by the run (`Gateways`: plan, apply and its confirmations, audit,
exec), or, for a caller without a run, hops of its own opened the same way. Every hop is a
`Link` (host keys judged by `provision.ssh.hostkeys`, keys offered by `provision.ssh.auth`;
paramiko only, no Fabric), logged in as `provision.ssh.login` says for the run's `Login`.

Never share a host's chain between threads (fabric #2262): call `connect()` once per host
thread. Connects that authenticate to one bastion at once are capped
(`provision.ssh.fanout.connect_slots`) below its sshd's MaxStartups, which otherwise drops
some of 32 hosts' connections ("Error reading SSH protocol banner").
"""

from __future__ import annotations

import contextlib
import copy
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paramiko

from provision.inventory.model import Host, Inventory

from .channel_socket import ChannelSocket
from .errors import ConnectError
from .fanout import connect_slots
from .hostkeys import KnownHosts, known_hosts_path
from .link import CONNECT_TIMEOUT, Link, connection
from .login import DEFAULT_LOGIN, Login, hop


def inventory_known_hosts(inv: Inventory) -> Path:
    return known_hosts_path(inv.known_hosts)


@dataclass
class Chain:
    """The open connection to a host, and the bastion hops it owns (None: the run's)."""

    host: Host
    conn: Any  # a Link once connected (fakes in tests)
    own_hops: Gateways | None = None
    retried: Any = None  # provision.ssh.retry.Retried, set by whoever retried the connect

    def close(self) -> None:
        if self.conn is not None:
            _close(self.conn)
        if self.own_hops is not None:
            self.own_hops.close()


def _close(c: Any) -> None:
    with contextlib.suppress(Exception):  # closing a dead connection is no error
        _hang_up(c)
        c.close()


def _hang_up(c: Any) -> None:
    """Send the FIN now. paramiko's close() only drops our reference to the socket; the
    transport thread, blocked in select() on it, holds the file until its next wake-up, so
    the bastion's sshd kept the session ~0.1 s longer than we did (more connections on it
    than hosts in flight)."""
    transport = c.client.get_transport() if c.client is not None else None
    sock = getattr(transport, "sock", None)
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _connection(node: Host, login: Login, gateway: Link | None, store: KnownHosts,
                sock: ChannelSocket | None = None) -> Link:
    return connection(hop(node, login), store, gateway=gateway, sock=sock)


_slots: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_slots_lock = threading.Lock()


def _sshd_slot(address: str, port: int) -> threading.BoundedSemaphore:
    with _slots_lock:
        slot = _slots.get((address, port))
        if slot is None:
            slot = _slots[(address, port)] = threading.BoundedSemaphore(connect_slots())
        return slot


def _open_capped(c: Any, node: Host) -> None:
    """Open one hop. A bastion's connect slot is held from the TCP connect until we are
    authenticated to it, which is what sshd's MaxStartups counts; never while a channel
    through it waits for the next host (a host whose new firewall drops the bastion's SYN
    would hold the slot for minutes and starve every other host's confirmation)."""
    if not node.is_bastion:
        c.open()
        return
    with _sshd_slot(node.address, node.port):
        c.open()


class Gateways:
    """The bastion hops of one run, opened once and shared by every host behind them.

    Each host still gets its own transport to itself, carried by a `direct-tcpip` channel of
    the shared bastion transport (paramiko opens channels on one transport from any
    thread). Per-host bastion logins cost the bastion an sshd process, a key exchange, an
    authentication and a PAM session each: 32 of them at once saturated two cores for
    seconds of a no-op run. The hops are opened under a lock per chain, so two threads never
    open one (fabric #2262), and reopened when found dead. A failed open is shared too: the
    threads that waited for it get its error at once instead of each trying in turn behind
    the lock (a bastion that times out would otherwise hold 32 hosts for 32 timeouts); each
    retries on its own schedule. Close it after the hosts' chains.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._locks: dict[tuple[str, ...], threading.Lock] = {}
        self._open: dict[tuple[str, ...], Link] = {}
        self._failed: dict[tuple[str, ...], tuple[float, BaseException]] = {}
        self._order: list[Link] = []

    def hop(self, chain: tuple[Host, ...], store: KnownHosts,
            login: Login = DEFAULT_LOGIN) -> Link:
        """The open connection to the last bastion of `chain`, through the ones before it."""
        key = (*(h.name for h in chain), login.user or "", login.identity_file or "")
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        asked = time.monotonic()
        with lock:
            c = self._open.get(key)
            if c is not None and c.is_connected:
                return c
            failed = self._failed.get(key)
            if failed is not None and failed[0] >= asked:  # tried while we waited
                raise _copied(failed[1])
            parent = self.hop(chain[:-1], store, login) if len(chain) > 1 else None
            c = _connection(chain[-1], login, parent, store)
            try:
                _open_capped(c, chain[-1])
            except Exception as e:
                _keep_transport(e, c)
                _close(c)
                self._failed[key] = (time.monotonic(), e)
                raise
            except BaseException:
                _close(c)
                raise
            self._failed.pop(key, None)
            self._open[key] = c
            self._order.append(c)
            return c

    def close(self) -> None:
        with self._lock:
            opened, self._order, self._open = self._order, [], {}
        for c in reversed(opened):  # innermost first
            _close(c)

    def __enter__(self) -> Gateways:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _copied(e: BaseException) -> BaseException:
    """A copy of a shared failure to raise in another thread (each raise writes its own
    traceback into the object); the original when the exception cannot be copied."""
    try:
        return copy.copy(e)
    except Exception:
        return e


def _keep_transport(e: BaseException, *conns: Any) -> None:
    """Attach the first transport among `conns` to `e`: sshd may have said why it refused
    (pam_nologin's message), and the retry loop reads it from there."""
    failed = next((c.client.get_transport() for c in conns
                   if c.client is not None and c.client.get_transport() is not None), None)
    with contextlib.suppress(AttributeError, TypeError):
        e.provision_transport = failed  # type: ignore[attr-defined]


def connect(inv: Inventory, host: Host, accept_new: bool = False,
            gateways: Gateways | None = None, login: Login = DEFAULT_LOGIN) -> Chain:
    """Open the connection to `host` through its bastions, as `login`: the run's shared
    hops from `gateways`, or hops of its own (closed with the chain). Raises HostKeyError
    for a key we refuse, AuthError when no key is accepted, and socket/paramiko errors for
    anything else."""
    store = KnownHosts(inventory_known_hosts(inv), accept_new)
    path = tuple(inv.chain(host))
    own = Gateways() if gateways is None and path else None
    hops = gateways or own
    chain = Chain(host, None, own)
    try:
        sock = None
        if hops is not None and path:
            bastion = hops.hop(path, store, login)
            assert bastion.transport is not None  # open: Gateways.hop raised otherwise
            try:
                channel = bastion.transport.open_channel(
                    "direct-tcpip", (host.address, host.port), ("", 0), timeout=CONNECT_TIMEOUT)
            except paramiko.ChannelException as e:  # the bastion's own connect failed
                raise ConnectError(f"{path[-1].name} cannot reach {host.address}:{host.port} "
                                   f"({e.text}: sshd down, or the port filtered)") from None
            sock = ChannelSocket(channel)
        chain.conn = _connection(host, login, None, store, sock=sock)
        _open_capped(chain.conn, host)
    except BaseException as e:
        if chain.conn is not None and not hasattr(e, "provision_transport"):
            _keep_transport(e, chain.conn)  # a failed hop attached its own in Gateways.hop
        chain.close()
        raise
    return chain
