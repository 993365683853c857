"""SSH connections from the inventory (I/O): a Fabric Connection per host, through its
bastions: hops shared by the run (`Gateways`: plan, apply and its confirmations, audit), or,
for a caller without a run, hops of its own opened the same way. Host keys are judged by
`provision.ssh.hostkeys`.

Fabric hard-codes paramiko's AutoAddPolicy; we replace it on every hop with a policy that
hands the key to the one trust path (unknown refused unless accept-new; a key known only
under another type refused). A changed key of a known type makes paramiko raise
BadHostKeyException before any policy is asked; `connect` turns it into the same
HostKeyError. Never share a host's chain between threads (fabric #2262): call `connect()`
once per host thread. Connects that authenticate to one bastion at once are capped
(`provision.ssh.fanout.connect_slots`) below its sshd's MaxStartups, which otherwise drops
some of 32 hosts' connections ("Error reading SSH protocol banner").
"""

from __future__ import annotations

import contextlib
import copy
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.inventory.model import Host, Inventory

from .channel_socket import ChannelSocket
from .errors import HostKeyError
from .fanout import connect_slots
from .hostkeys import KnownHosts, key_name, known_hosts_path, refusal

CONNECT_TIMEOUT = 10


def inventory_known_hosts(inv: Inventory) -> Path:
    return known_hosts_path(inv.known_hosts)


class _Policy:
    """paramiko's MissingHostKeyPolicy, asked when no key of the offered type is recorded."""

    def __init__(self, store: KnownHosts, node: Host):
        self.store = store
        self.node = node

    def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
        self.store.check(self.node.name, self.node.address, self.node.port, key)


@dataclass
class Chain:
    """The open connection to a host, and the bastion hops it owns (None: the run's)."""

    host: Host
    conn: Any  # fabric.Connection
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


def _connection(inv: Inventory, node: Host, gateway: Any, store: KnownHosts,
                sock: ChannelSocket | None = None) -> Any:
    from fabric import Config, Connection

    config = Config(overrides={"load_ssh_configs": False, "run": {"hide": True, "warn": True}},
                    lazy=True)
    key = node.identity_file or inv.identity_file
    connect_kwargs: dict[str, Any] = {"allow_agent": False, "look_for_keys": key is None,
                                      "banner_timeout": CONNECT_TIMEOUT,
                                      "auth_timeout": CONNECT_TIMEOUT}
    if key:
        connect_kwargs["key_filename"] = os.path.expanduser(key)
    if sock is not None:
        connect_kwargs["sock"] = sock
    c = Connection(node.address, user=node.user, port=node.port, config=config,
                   gateway=gateway if gateway is not None else False,
                   connect_timeout=CONNECT_TIMEOUT, connect_kwargs=connect_kwargs)
    # What SSHClient.connect consults (and orders host key types by); no system keys loaded.
    c.client._host_keys = store.keys
    c.client.set_missing_host_key_policy(_Policy(store, node))
    return c


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
        self._open: dict[tuple[str, ...], Any] = {}
        self._failed: dict[tuple[str, ...], tuple[float, BaseException]] = {}
        self._order: list[Any] = []

    def hop(self, inv: Inventory, chain: tuple[Host, ...], store: KnownHosts) -> Any:
        """The open connection to the last bastion of `chain`, through the ones before it."""
        key = tuple(h.name for h in chain)
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
            parent = self.hop(inv, chain[:-1], store) if len(chain) > 1 else None
            c = _connection(inv, chain[-1], parent, store)
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
            gateways: Gateways | None = None) -> Chain:
    """Open the connection to `host` through its bastions: the run's shared hops from
    `gateways`, or hops of its own (closed with the chain). Raises HostKeyError for a key we
    refuse, and socket/paramiko errors for anything else."""
    from paramiko.ssh_exception import BadHostKeyException

    store = KnownHosts(inventory_known_hosts(inv), accept_new)
    path = tuple(inv.chain(host))
    nodes = {n.address: n for n in (*path, host)}
    own = Gateways() if gateways is None and path else None
    hops = gateways or own
    chain = Chain(host, None, own)
    try:
        sock = None
        if hops is not None and path:
            channel = hops.hop(inv, path, store).transport.open_channel(
                "direct-tcpip", (host.address, host.port), ("", 0), timeout=CONNECT_TIMEOUT)
            sock = ChannelSocket(channel)
        chain.conn = _connection(inv, host, None, store, sock=sock)
        _open_capped(chain.conn, host)
    except BadHostKeyException as e:
        chain.close()
        node = nodes.get(e.hostname.strip("[]").rsplit("]:", 1)[0], host)
        key = e.key
        raise HostKeyError(refusal("changed", node.name, key_name(node.address, node.port),
                                   key.get_name(), key.asbytes(), store.path,
                                   (e.expected_key.get_name(),))) from None
    except BaseException as e:
        if chain.conn is not None and not hasattr(e, "provision_transport"):
            _keep_transport(e, chain.conn)  # a failed hop attached its own in Gateways.hop
        chain.close()
        raise
    return chain
