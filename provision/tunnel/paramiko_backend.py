"""The paramiko tunnel backend (I/O): an SSH chain over direct-tcpip channels, our own forwarder.

sshtunnel binds 0.0.0.0, has no ProxyJump and no known_hosts check, and copies in small
chunks (docs/architecture.md#ssh-fabric-and-paramiko), so the forwarder is written directly
on paramiko: one hop per `provision.ssh.link.connection` (the one link: host keys, keys
offered), each carried by a `direct-tcpip` channel of the hop before it, with a bigger window
and faster ciphers (`Settings`); nothing accepted on trust; listeners on 127.0.0.1 that
outlive reconnects.
Works where there is no `ssh` binary.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import paramiko

from provision.inventory.forwards import LOCAL_BIND, Forward, peer_uid
from provision.ssh.channel_socket import READ_ALL, ChannelSocket
from provision.ssh.errors import ConnectError
from provision.ssh.hostkeys import KnownHosts, known_hosts_path
from provision.ssh.link import Link as HopLink
from provision.ssh.link import Settings, connection, tcp
from provision.ssh.login import Hop
from provision.ssh.streamlocal import open_streamlocal
from provision.tunnel.backends import BackendSpec, Request
from provision.tunnel.backoff import KEEPALIVE_COUNT
from provision.tunnel.status import nothing_listening

# Per-channel window. Twice OpenSSH's 2 MiB: more (16–64 MiB) lets sshd queue a window's
# worth ahead of us and the first transfers crawl at ~20 MB/s with sshd spinning at 100 %.
WINDOW = 4 * 1024 * 1024
PACKET = 32 * 1024  # 128 KiB packets measured 5x slower through the jump chain
PUMP_READ = 256 * 1024
CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "aes128-ctr", "aes256-ctr")
TUNNEL_HINT = "Check the fingerprint, then add it to known_hosts (a tunnel never accepts a key on trust)"

Log = Callable[[str], None]

# paramiko logs refused channel opens as warnings; we report them ourselves, once
logging.getLogger("paramiko").addHandler(logging.NullHandler())


class Link:
    """An authenticated chain of hops (`provision.ssh.link`); the last one reaches the target."""

    def __init__(self, hops: Sequence[Hop], known_hosts: str, timeout: float = 10.0):
        self.hops = tuple(hops)
        self.conns: list[HopLink] = []
        self.sock: socket.socket | None = None
        self.dead: str | None = None
        store = KnownHosts(Path(os.path.expanduser(known_hosts)), accept_new=False, hint=TUNNEL_HINT)
        try:
            self._open(store, Settings(WINDOW, PACKET, CIPHERS, timeout))
        except BaseException:
            self.close()
            raise

    @property
    def target(self) -> paramiko.Transport:
        transport = self.conns[-1].transport
        assert transport is not None  # set by _open, which raised otherwise
        return transport

    def _open(self, store: KnownHosts, settings: Settings) -> None:
        first = self.hops[0]
        try:
            self.sock = tcp(first, settings.timeout)
        except OSError as e:
            raise ConnectError(f"{first.name} ({first.address}:{first.port}): {e.strerror or e}") from None
        carrier: socket.socket | ChannelSocket = self.sock
        for i, hop in enumerate(self.hops):
            where = f"{hop.name} ({hop.address}:{hop.port})"
            c = connection(hop, store, sock=carrier, settings=settings, label=where)
            self.conns.append(c)
            try:
                c.open()
            except ConnectError:  # HostKeyError, AuthError: already say which hop
                raise
            except (paramiko.SSHException, OSError, EOFError) as e:
                raise ConnectError(f"{where}: SSH connection failed: {e}") from None
            if i + 1 < len(self.hops):
                nxt = self.hops[i + 1]
                assert c.transport is not None  # open, or it raised
                try:
                    chan = c.transport.open_channel("direct-tcpip", (nxt.address, nxt.port),
                                                    ("127.0.0.1", 0), timeout=settings.timeout)
                    carrier = ChannelSocket(chan)
                except (paramiko.SSHException, OSError) as e:
                    raise ConnectError(f"{hop.name} cannot reach {nxt.name} ({nxt.address}:"
                                       f"{nxt.port}): {e}") from None

    def keepalive(self, timeout: float) -> bool:
        """One keepalive round trip through the whole chain, answered within `timeout`."""
        t = self.target
        done = threading.Event()

        def ask() -> None:
            with contextlib.suppress(Exception):
                t.global_request("keepalive@openssh.com", wait=True)
            done.set()

        threading.Thread(target=ask, daemon=True, name="tunnel-keepalive").start()
        return done.wait(timeout) and t.is_active()

    def exec(self, command: str, timeout: float) -> tuple[int, str]:
        ch = self.target.open_session(timeout=timeout)
        try:
            ch.settimeout(timeout)
            ch.set_combine_stderr(True)
            ch.exec_command(command)
            chunks = []
            while True:
                data = ch.recv(65536)
                if not data:
                    break
                chunks.append(data)
            return ch.recv_exit_status(), b"".join(chunks).decode(errors="replace")
        finally:
            ch.close()

    def open(self, fwd: Forward, origin: tuple[str, int], timeout: float) -> paramiko.Channel:
        """A channel to what `fwd` reaches on the target: its host:port (direct-tcpip), or
        its Unix socket (direct-streamlocal, a member's own server)."""
        if fwd.remote_socket is not None:
            return open_streamlocal(self.target, fwd.remote_socket, timeout)
        return self.target.open_channel("direct-tcpip", (fwd.remote_host, fwd.remote_port),
                                        origin, timeout=timeout)

    def probe(self, fwd: Forward, timeout: float) -> bool:
        """Is anything listening where `fwd` reaches on the target? (a channel open, like nc -z)"""
        try:
            ch = self.open(fwd, ("127.0.0.1", 0), timeout)
        except paramiko.ChannelException:
            return False
        ch.close()
        return True

    def close(self) -> None:
        if self.sock is not None:
            # shutdown wakes every thread blocked on the socket; close alone does not
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
        for c in reversed(self.conns):
            with contextlib.suppress(Exception):
                c.close()
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()


class ParamikoBackend:
    """Listeners on 127.0.0.1 that stay bound across reconnects; a Link that comes and goes."""

    name = "paramiko"

    def __init__(self, hops: Sequence[Hop], forwards: Sequence[Forward], known_hosts: str,
                 keepalive: int, log: Log, host: str):
        self.hops = tuple(hops)
        self.forwards = tuple(forwards)
        self.known_hosts = known_hosts
        self.keepalive_s = keepalive
        self.log = log
        self.host = host
        self._link: Link | None = None
        self._up = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, str] = {}  # open client connections -> their service
        self._held: set[str] = set()  # services not forwarded now (another account on the port)
        self._threads: list[threading.Thread] = []
        self._listeners: list[tuple[Forward, socket.socket]] = []
        self._reported: dict[str, float] = {}
        try:
            for f in self.forwards:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((LOCAL_BIND, f.local_port))
                s.listen(64)
                s.settimeout(0.5)
                self._listeners.append((f, s))
        except OSError as e:
            self.close()
            raise ConnectError(f"cannot listen on {LOCAL_BIND}: {e.strerror or e}") from None

    # the Backend interface -----------------------------------------------------------
    def connect(self, timeout: float = 10.0) -> None:
        link = Link(self.hops, self.known_hosts, timeout)
        with self._lock:
            self._link = link
        self._up.set()
        monitor = threading.Thread(target=self._monitor, args=(link,), daemon=True,
                                   name="tunnel-liveness")
        monitor.start()
        if not self._threads:
            for f, s in self._listeners:
                th = threading.Thread(target=self._accept, args=(f, s), daemon=True,
                                      name=f"tunnel-accept-{f.local_port}")
                th.start()
                self._threads.append(th)

    def alive(self) -> str | None:
        link = self._link
        if link is None:
            return "not connected"
        if link.dead:
            return link.dead
        if not link.target.is_active():
            link.dead = "connection closed by the remote side"
        return link.dead

    def disconnect(self) -> None:
        self._up.clear()
        with self._lock:
            link, self._link = self._link, None
        if link is not None:
            link.close()

    def run(self, command: str, timeout: float = 20.0) -> tuple[int, str]:
        link = self._link
        if link is None:
            raise ConnectError("not connected")
        return link.exec(command, timeout)

    def probe(self, fwd: Forward, timeout: float = 5.0) -> bool | None:
        link = self._link
        if link is None:
            return None
        try:
            return link.probe(fwd, timeout)
        except (paramiko.SSHException, OSError):
            return None

    def close(self) -> None:
        self._stop.set()
        self.disconnect()
        self._up.set()  # wake clients waiting for a link: there will be none
        for _, s in self._listeners:
            with contextlib.suppress(OSError):
                s.close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                c.close()
        for th in self._threads:
            th.join(timeout=2)

    # internals -------------------------------------------------------------------------
    def _monitor(self, link: Link) -> None:
        """Our own liveness check: a keepalive round trip every interval, dead after 3 misses."""
        misses = 0
        while not self._stop.is_set() and self._link is link and not link.dead:
            if self._stop.wait(self.keepalive_s):
                return
            if self._link is not link:
                return
            if not link.target.is_active():
                link.dead = "connection closed by the remote side"
                return
            if link.keepalive(self.keepalive_s):
                misses = 0
                continue
            misses += 1
            if misses >= KEEPALIVE_COUNT:
                link.dead = (f"no answer to keepalive for {misses * self.keepalive_s}s "
                             f"({misses} × {self.keepalive_s}s)")
                # unblock everything waiting on the dead socket now
                link.close()
                return

    def _accept(self, fwd: Forward, listener: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                conn, addr = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(fwd, conn, addr), daemon=True,
                             name=f"tunnel-conn-{fwd.local_port}").start()

    def hold(self, fwd: Forward, held: bool) -> None:
        """Stop forwarding `fwd` (new clients refused, open ones closed), or resume it."""
        with self._lock:
            if not held:
                self._held.discard(fwd.service)
                return
            self._held.add(fwd.service)
            conns = [c for c, service in self._conns.items() if service == fwd.service]
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)

    def _serve(self, fwd: Forward, conn: socket.socket, addr: tuple[str, int]) -> None:
        if not self._ours(fwd, addr):
            conn.close()
            return
        with self._lock:
            if fwd.service in self._held:
                conn.close()
                return
            self._conns[conn] = fwd.service
        try:
            # a client arriving during a reconnect waits for the link instead of failing
            if not self._up.wait(timeout=30) or self._stop.is_set():
                return
            link = self._link
            if link is None:
                return
            try:
                chan = link.open(fwd, addr, timeout=10)
            except paramiko.ChannelException:
                self._report_once(fwd, nothing_listening(fwd, self.host))
                return
            except (paramiko.SSHException, OSError, EOFError) as e:
                self._report_once(fwd, f"{fwd.service}: forward failed: {e}")
                return
            _pump(conn, chan)
        finally:
            with self._lock:
                self._conns.pop(conn, None)
            with contextlib.suppress(OSError):
                conn.close()

    def _ours(self, fwd: Forward, addr: tuple[str, int]) -> bool:
        """Only the operator's own account uses the forward: a connection from another
        account on this machine (Linux: its socket's uid in /proc/net/tcp) is refused. Where
        the kernel does not say (no /proc), every local connection is let through
        (docs/tunnels.md says so)."""
        try:
            table = Path("/proc/net/tcp").read_text()
        except OSError:
            return True
        uid = peer_uid(table, addr, fwd.local_port)
        if uid is None or uid == os.getuid():
            return True
        self._report_once(fwd, f"{fwd.service}: refused a connection to {fwd.local} from uid "
                               f"{uid}, another account on this machine")
        return False

    def _report_once(self, fwd: Forward, message: str) -> None:
        now = time.monotonic()
        if now - self._reported.get(fwd.service, -1e9) > 10:
            self._reported[fwd.service] = now
            self.log(message)


def _make(r: Request) -> ParamikoBackend:
    return ParamikoBackend(r.hops, r.forwards, str(known_hosts_path(r.inv.known_hosts)),
                           r.keepalive, r.log, r.host.name)


BACKEND = BackendSpec("paramiko", "paramiko in-process (no ssh binary needed)", lambda: None, _make)


def _pump(conn: socket.socket, chan: paramiko.Channel) -> None:
    """Copy both ways until both sides are done; big chunks, half-close aware."""

    def up() -> None:  # local client -> remote service
        try:
            while True:
                data = conn.recv(PUMP_READ)
                if not data:
                    break
                chan.sendall(data)
        except (OSError, paramiko.SSHException, EOFError):
            pass
        with contextlib.suppress(Exception):
            chan.shutdown_write()

    th = threading.Thread(target=up, daemon=True, name="tunnel-up")
    th.start()
    try:
        while True:
            data = chan.recv(READ_ALL)  # all that is queued: see provision.ssh.channel_socket
            if not data:
                break
            conn.sendall(data)
    except (OSError, paramiko.SSHException, EOFError):
        pass
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR if not chan.closed else socket.SHUT_RDWR)
    th.join(timeout=60)
    with contextlib.suppress(Exception):
        chan.close()
