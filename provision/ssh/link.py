"""The one SSH link (I/O): every hop provision opens is a `Link`, made by `connection()`.

Converge, audit and confirmations (`provision.ssh.connect`), `provision exec`, the paramiko
tunnel backend and the Fabric connections of `provision.fleet` (a `fabric.Connection` over a
`Link`: `provision.ssh.fabric_link`) all open their hops here, so they judge host keys and
offer keys the same way. A `Link` is paramiko only: neither this module nor the commands
that use it import Fabric or invoke (~0.15 s of start-up).

- **Host keys** go through the one trust path, `provision.ssh.hostkeys.KnownHosts`: the
  paramiko client holds no host keys of its own, so every key the server offers is handed
  to our missing-host-key policy, which asks `KnownHosts.check` (unknown refused unless
  accept-new, changed or revoked always refused). The key types recorded for the hop are
  moved to the front of the offer so the server shows the key we know (a key of another
  type counts as changed).
- **Keys offered** follow `provision.ssh.auth.key_offer`, tried by `KeyStrategy` (a paramiko
  `AuthStrategy`, handed to `SSHClient.connect`).
- **Window, packet size and ciphers** are `Settings`, applied by the transport factory
  paramiko's `SSHClient.connect` accepts.
- **Jump hops** ride on a `direct-tcpip` channel of the hop before, wrapped in
  `ChannelSocket` (see there why a bare channel is not a good socket).

Only paramiko's public API is used.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paramiko
from paramiko.auth_strategy import (
    AuthResult,
    AuthSource,
    AuthStrategy,
    InMemoryPrivateKey,
    OnDiskPrivateKey,
)
from paramiko.pkey import PublicBlob

from provision.frozen import frozen

from .auth import AgentKeys, KeyFile, key_offer
from .channel_socket import ChannelSocket
from .errors import AuthError
from .hostkeys import KnownHosts
from .login import Hop
from .paramiko_clock import install as _monotonic_timeouts

_monotonic_timeouts()  # every transport is made here: paramiko's waits by a clock that never steps

CONNECT_TIMEOUT = 10.0

# paramiko logs refused channel opens and failed handshakes on its own; callers report them
logging.getLogger("paramiko").addHandler(logging.NullHandler())


@frozen
class Settings:
    """Transport parameters of a hop. None: paramiko's own."""

    window: int | None = None  # per-channel window, bytes
    packet: int | None = None  # max packet size, bytes
    ciphers: tuple[str, ...] | None = None  # preferred ciphers, in order (others dropped)
    timeout: float = CONNECT_TIMEOUT  # TCP connect, banner, authentication


DEFAULT = Settings()


def _label(hop: Hop) -> str:
    return f"{hop.name} ({hop.address}:{hop.port})"


class KeyStrategy(AuthStrategy):
    """Offers the keys `key_offer` names for `hop`, in that order; nothing else. A key file
    that cannot be loaded is skipped and named in the error when no key is accepted; a
    connection that breaks during authentication raises the transport's own error (a host
    still booting is retried by the caller, a rejected key is not)."""

    def __init__(self, hop: Hop, agent_socket: str | None = None) -> None:
        super().__init__(ssh_config=paramiko.SSHConfig())
        self.hop = hop
        self.offer = key_offer(hop.identity_file, bool(agent_socket))
        self.tried: list[str] = []

    def get_sources(self) -> Iterator[AuthSource]:
        loaded: set[str] = set()
        for src in self.offer:
            if isinstance(src, AgentKeys):
                if src.only_for in loaded:
                    continue  # the file's own key was offered already
                want = None if src.only_for is None else _public_blob(src.only_for)
                if src.only_for is not None and want is None:
                    continue  # no .pub beside it: nothing to match an agent key with
                try:
                    keys = paramiko.Agent().get_keys()
                except (paramiko.SSHException, OSError) as e:
                    self.tried.append(f"ssh-agent ({e})")
                    continue
                for k in keys:
                    if want is None or k.asbytes() == want:
                        yield InMemoryPrivateKey(self.hop.user, k)
                continue
            key = self._load(src)
            if key is not None:
                loaded.add(src.path)
                yield OnDiskPrivateKey(self.hop.user, "python-config" if src.named else
                                       "implicit-home", Path(src.path), key)

    def _load(self, src: KeyFile) -> paramiko.PKey | None:
        full = os.path.expanduser(src.path)
        if not os.path.exists(full):
            if src.named:
                self.tried.append(f"{src.path} (missing)")
            return None
        try:
            return paramiko.PKey.from_path(full)
        except (paramiko.PasswordRequiredException, TypeError):
            # cryptography's loaders raise TypeError for a passphrase-protected file
            self.tried.append(f"{src.path} (encrypted: load it into ssh-agent)")
        except (paramiko.SSHException, ValueError, OSError) as e:
            self.tried.append(f"{src.path} ({e})")
        return None

    def authenticate(self, transport: paramiko.Transport) -> AuthResult:
        result = AuthResult(strategy=self)
        self.tried = []
        for source in self.get_sources():
            try:
                source.authenticate(transport)
            except paramiko.AuthenticationException:
                if not transport.is_active():
                    # sshd closed the connection instead of refusing the key (pam_nologin
                    # while booting, MaxStartups): a retry may get in, a key refusal not
                    raise paramiko.SSHException(
                        "transport shut down or saw EOF during authentication: the server "
                        "closed the connection (a host still starting up, or sshd shedding load)") from None
                self.tried.append(_source_name(source))
                continue
            if transport.is_authenticated():
                return result
            self.tried.append(_source_name(source) + " (partial)")
        raise AuthError(f"{_label(self.hop)}: authentication failed as {self.hop.user} "
                        f"(tried: {', '.join(self.tried) or 'no keys found'})")


def _public_blob(identity_file: str) -> bytes | None:
    """The public key of an identity file, from the `.pub` beside it (None: none readable)."""
    try:
        blob: bytes = PublicBlob.from_file(os.path.expanduser(identity_file) + ".pub").key_blob
        return blob
    except (OSError, ValueError, paramiko.SSHException):
        return None


def _source_name(source: AuthSource) -> str:
    if isinstance(source, OnDiskPrivateKey):
        return str(source.path)
    comment = getattr(getattr(source, "pkey", None), "comment", "")
    return f"ssh-agent key {comment}".strip()


class HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Every server key goes to the one trust path (the client holds no keys of its own)."""

    def __init__(self, store: KnownHosts, hop: Hop, label: str) -> None:
        self.store = store
        self.hop = hop
        self.label = label

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        self.store.check(self.label, self.hop.address, self.hop.port, key)


def _key_family(name: str) -> str:
    return "rsa" if "rsa" in name else name


def _transport_factory(hop: Hop, store: KnownHosts, settings: Settings) -> Any:
    known = {_key_family(n) for n in store.known(hop.address, hop.port)}

    def make(sock: Any, disabled_algorithms: dict[str, list[str]] | None = None) -> paramiko.Transport:
        if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
            nodelay(sock)
            sock = quickack(sock)  # paramiko's own socket: nobody else holds it
        kwargs: dict[str, Any] = {"disabled_algorithms": disabled_algorithms}
        if settings.window is not None:
            kwargs["default_window_size"] = settings.window
        if settings.packet is not None:
            kwargs["default_max_packet_size"] = settings.packet
        t = paramiko.Transport(sock, **kwargs)
        opts = t.get_security_options()
        if settings.ciphers:
            opts.ciphers = [c for c in settings.ciphers if c in opts.ciphers]
        preferred = [k for k in opts.key_types if _key_family(k) in known]
        if preferred:
            opts.key_types = preferred + [k for k in opts.key_types if k not in preferred]
        return t

    return make


class Link:
    """One SSH hop, not yet opened: to `hop`, through `gateway` (the `Link` to the bastion
    before it), over `sock` (a socket or ChannelSocket the caller opened), or straight over
    TCP. `open` is safe from several threads (a bastion shared by many hosts' threads:
    fabric #2262) and does nothing when already open; `close` may be called any time.

    The attribute names are those of Fabric's `Connection` (`host`, `port`, `user`,
    `gateway`, `client`, `transport`, `is_connected`, `open`, `open_gateway`, `close`), which
    every hop used to be; `provision.ssh.fabric_link` makes one a `fabric.Connection`."""

    def __init__(self, hop: Hop, store: KnownHosts, *, gateway: Link | None = None,
                 sock: Any = None, settings: Settings = DEFAULT, label: str | None = None) -> None:
        self.hop = hop
        self.host = hop.address
        self.port = hop.port
        self.user = hop.user
        self.gateway = gateway
        self.sock = sock
        self.settings = settings
        self.store = store
        self.auth_strategy = KeyStrategy(hop, os.environ.get("SSH_AUTH_SOCK"))
        #: The paramiko client; it holds no host keys, so every key goes to the policy.
        self.client = paramiko.SSHClient()
        self.client.set_missing_host_key_policy(HostKeyPolicy(store, hop, label or hop.name))
        #: The open transport (None until `open`).
        self.transport: paramiko.Transport | None = None
        self.open_lock = threading.Lock()

    @property
    def is_connected(self) -> bool:
        return self.transport is not None and self.transport.is_active()

    def connect_kwargs(self, sock: Any) -> dict[str, Any]:
        """What `SSHClient.connect` gets: what Fabric's `Connection.open` passed it for our
        hops (with an `auth_strategy`, paramiko ignores allow_agent, look_for_keys,
        key_filename and password), the timeout a float (Fabric truncated it to an int)."""
        return {
            "hostname": self.host, "port": self.port, "username": self.user, "sock": sock,
            "timeout": self.settings.timeout, "banner_timeout": self.settings.timeout,
            "auth_timeout": self.settings.timeout, "auth_strategy": self.auth_strategy,
            "transport_factory": _transport_factory(self.hop, self.store, self.settings),
        }

    def open(self) -> None:
        """Connect, check the host key, authenticate (the hops before first, if closed)."""
        with self.open_lock:
            if self.is_connected:
                return
            sock = self.open_gateway() if self.gateway is not None else self.sock
            self.client.connect(**self.connect_kwargs(sock))
            self.transport = self.client.get_transport()

    def open_gateway(self) -> ChannelSocket:
        """A `direct-tcpip` channel from the gateway hop (opened first) to this hop."""
        gateway = self.gateway
        assert gateway is not None
        gateway.open()
        assert gateway.transport is not None
        chan = gateway.transport.open_channel("direct-tcpip", (self.host, int(self.port)),
                                              ("", 0), timeout=self.settings.timeout)
        return ChannelSocket(chan)

    def close(self) -> None:
        """Close the transport (also one that failed to authenticate); the gateway stays."""
        self.client.close()

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        via = f" via {self.gateway!r}" if self.gateway is not None else ""
        return f"<Link {self.user}@{self.host}:{self.port}{via}>"


def connection(hop: Hop, store: KnownHosts, *, gateway: Link | None = None,
               sock: Any = None, settings: Settings = DEFAULT, label: str | None = None) -> Link:
    """The (not yet opened) link to `hop`: through `gateway` (a Link to the bastion
    before it), over `sock` (a socket or ChannelSocket the caller opened), or straight
    over TCP. `label` names the hop in host-key refusals (default: its name)."""
    return Link(hop, store, gateway=gateway, sock=sock, settings=settings, label=label)


def nodelay(sock: socket.socket) -> None:
    """Nagle off. paramiko writes each SSH packet on its own (OpenSSH batches them), so
    with Nagle on, a second small write waited for the ACK of the first, which the server
    delays by 40 ms while it waits for that very second packet: ~45 ms on nearly every
    round trip of a handshake, an authentication and a channel open, on both hops of a jump
    chain (their packets share the first hop's socket)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)  # Linux only


class QuickAckSocket(socket.socket):
    """A TCP socket that acknowledges what it reads at once. sshd leaves Nagle on for an
    exec without a terminal, so its small last write (a probe's final lines, an exit
    status) waits for the ACK of the write before it, and Linux delays that ACK by 40 ms
    once a connection looks interactive: 40 ms at the end of nearly every remote command,
    measured in the lab (`plan` 58 ms, `exec` 82 ms). The kernel leaves quick-ACK mode on
    its own, so it is asked for again after every read."""

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data = super().recv(bufsize, flags)
        if QUICKACK is not None:
            with contextlib.suppress(OSError):  # closed meanwhile: the read said what there was
                self.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)
        return data


def quickack(sock: socket.socket) -> socket.socket:
    """`sock` as a QuickAckSocket (the same connection; `sock` itself is spent), where the
    system has TCP_QUICKACK."""
    if QUICKACK is None or isinstance(sock, QuickAckSocket):
        return sock
    timeout = sock.gettimeout()
    out = QuickAckSocket(fileno=sock.detach())
    out.settimeout(timeout)
    return out


def tcp(hop: Hop, timeout: float = CONNECT_TIMEOUT) -> socket.socket:
    """A TCP connection to the first hop, Nagle off (SSH sends many small packets) and its
    ACKs at once (`QuickAckSocket`)."""
    sock = quickack(socket.create_connection((hop.address, hop.port), timeout=timeout))
    nodelay(sock)
    return sock
