"""The one authentication policy: which keys are offered in which case (pure), and proof
that converge's connection, the paramiko tunnel backend and the Fabric connections of
`provision.fleet` all log in through it, against a real paramiko SSH server on loopback that
records every key it is offered."""

from __future__ import annotations

import copy
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import fabric
import paramiko
import pytest

from provision import fleet
from provision.inventory import load_inventory
from provision.ssh import connect as C
from provision.ssh import link as L
from provision.ssh.auth import DEFAULT_KEYS, AgentKeys, KeyFile, key_offer
from provision.ssh.errors import AuthError, HostKeyError
from provision.ssh.link import KeyStrategy
from provision.ssh.login import Hop, Login, hops
from provision.ssh.retry import transient
from provision.tunnel.paramiko_backend import Link as TunnelLink

# --- the policy (pure) --------------------------------------------------------------------


def test_a_named_identity_is_the_only_key_the_agent_may_stand_in_for_it() -> None:
    assert key_offer("~/.ssh/team", agent_running=True) == (
        KeyFile("~/.ssh/team", named=True), AgentKeys(only_for="~/.ssh/team"))


def test_a_named_identity_without_an_agent_is_the_only_key() -> None:
    assert key_offer("/keys/admin", agent_running=False) == (KeyFile("/keys/admin", named=True),)


def test_no_identity_offers_the_agent_then_the_openssh_defaults() -> None:
    assert key_offer(None, agent_running=True) == (
        AgentKeys(), *(KeyFile(p, named=False) for p in DEFAULT_KEYS))
    assert key_offer("", agent_running=False) == tuple(KeyFile(p, named=False) for p in DEFAULT_KEYS)
    assert DEFAULT_KEYS == ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")


def test_the_strategy_offers_what_the_policy_says(tmp_path: Path) -> None:
    """Loaded keys become sources in policy order; a named key that is missing or
    encrypted is skipped and reported; a missing default key is not worth a word."""
    good = tmp_path / "id_good"
    paramiko.RSAKey.generate(1024).write_private_key_file(str(good))
    locked = tmp_path / "id_locked"
    paramiko.RSAKey.generate(1024).write_private_key_file(str(locked), password="pw")
    s = KeyStrategy(Hop("h", "127.0.0.1", 22, "root", str(good)), agent_socket=None)
    assert [str(x.path) for x in s.get_sources()] == [str(good)]
    s = KeyStrategy(Hop("h", "127.0.0.1", 22, "root", str(locked)), agent_socket=None)
    assert list(s.get_sources()) == [] and s.tried == [f"{locked} (encrypted: load it into ssh-agent)"]
    s = KeyStrategy(Hop("h", "127.0.0.1", 22, "root", str(tmp_path / "nope")), agent_socket=None)
    assert list(s.get_sources()) == [] and s.tried == [f"{tmp_path / 'nope'} (missing)"]


def test_a_team_member_logs_in_with_their_own_key_on_every_hop(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, 22, "/keys/admin", via=True)
    host = inv.node("gpu")
    assert [(h.user, h.identity_file) for h in hops(inv, host, Login("alice", "/keys/alice", True))] \
        == [("alice", "/keys/alice"), ("alice", "/keys/alice")]
    assert [(h.user, h.identity_file) for h in hops(inv, host)] == [
        ("root", "/keys/admin"), ("root", "/keys/admin")]


# --- both code paths go through it, against a real SSH server ------------------------------

class Recorder(paramiko.ServerInterface):
    def __init__(self, accept: bytes | None) -> None:
        self.accept = accept
        self.offered: list[tuple[str, str]] = []
        self.forwards: dict[int, tuple[str, int]] = {}  # channel id -> where it goes

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        self.offered.append((username, key.get_base64()))
        return paramiko.AUTH_SUCCESSFUL if key.asbytes() == self.accept else paramiko.AUTH_FAILED

    # a session runs any command as `echo ran: COMMAND`; direct-tcpip reaches loopback only
    def check_channel_request(self, kind: str, chanid: int) -> int:
        return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_direct_tcpip_request(self, chanid: int, origin: tuple[str, int],
                                           destination: tuple[str, int]) -> int:
        if destination[0] != "127.0.0.1":
            return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED
        self.forwards[chanid] = destination
        return paramiko.OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        def answer() -> None:  # EOF, not close: a close may overtake the reply to the exec
            channel.sendall(b"ran: " + command + b"\n")
            channel.send_exit_status(0)
            channel.shutdown_write()

        threading.Thread(target=answer, daemon=True).start()
        return True



def _pump(a: paramiko.Channel, b: socket.socket) -> None:
    """Copy a direct-tcpip channel to its socket and back until either side closes."""
    def one_way(read: object, write: object) -> None:
        try:
            while data := read():  # type: ignore[operator]
                write(data)  # type: ignore[operator]
        except OSError:
            pass
        finally:
            a.close()
            b.close()

    threading.Thread(target=one_way, args=(lambda: a.recv(65536), b.sendall), daemon=True).start()
    threading.Thread(target=one_way, args=(lambda: b.recv(65536), a.sendall), daemon=True).start()


class Dropper(Recorder):
    """Closes the connection at the first key, as sshd does when PAM's account stack
    refuses a login (pam_nologin while the host boots: "fatal: Access denied [preauth]")."""

    transport: paramiko.Transport | None = None

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        self.offered.append((username, key.get_base64()))
        assert self.transport is not None
        self.transport.close()
        return paramiko.AUTH_FAILED


class Server:
    """A paramiko SSH server on 127.0.0.1 that logs the keys each login offers."""

    def __init__(self, accept: bytes | None, recorder: Recorder | None = None) -> None:
        self.host_key = paramiko.RSAKey.generate(1024)
        self.recorder = recorder or Recorder(accept)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.transports: list[paramiko.Transport] = []
        self.forwarded: list[tuple[str, int]] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            t = paramiko.Transport(conn)
            t.add_server_key(self.host_key)
            self.transports.append(t)
            # channel ids are per transport: each gets its own copy (sharing `offered`)
            recorder = copy.copy(self.recorder)
            recorder.forwards = {}
            if isinstance(recorder, Dropper):
                recorder.transport = t
            try:
                t.start_server(server=recorder)
            except (EOFError, OSError, paramiko.SSHException):
                continue  # the test closed us mid-handshake
            threading.Thread(target=self._channels, args=(t, recorder), daemon=True).start()

    def _channels(self, t: paramiko.Transport, recorder: Recorder) -> None:
        while t.is_active():
            ch = t.accept(0.2)
            dest = None if ch is None else recorder.forwards.get(ch.get_id())
            if ch is not None and dest is not None:
                self.forwarded.append(dest)
                _pump(ch, socket.create_connection(dest, timeout=5))

    def close(self) -> None:
        self.listener.close()
        for t in self.transports:
            t.close()


def _inventory(tmp: Path, port: int, identity: str, known: str = "", via: bool = False) -> C.Inventory:
    kh = tmp / "known_hosts"
    kh.write_text(known)
    bastion = f"bastions:\n  jump: {{address: 127.0.0.1, port: {port}}}\n" if via else ""
    p = tmp / "inventory.yml"
    p.write_text(f"version: 1\ndefaults:\n  user: root\n  identity_file: {identity}\n"
                 f"  known_hosts: {kh}\n{bastion}hosts:\n"
                 f"  gpu: {{address: 127.0.0.1, port: {port}{', via: jump' if via else ''}}}\n")
    return load_inventory(p)


@pytest.fixture()
def keys(tmp_path: Path) -> tuple[paramiko.RSAKey, Path]:
    key = paramiko.RSAKey.generate(1024)
    path = tmp_path / "id_test"
    key.write_private_key_file(str(path))
    return key, path


@pytest.fixture()
def no_agent(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    yield


def _known(server: Server) -> str:
    return f"[127.0.0.1]:{server.port} {server.host_key.get_name()} {server.host_key.get_base64()}\n"


def _converge(inv: C.Inventory) -> None:
    C.connect(inv, inv.node("gpu")).close()


def _tunnel(inv: C.Inventory) -> None:
    TunnelLink(hops(inv, inv.node("gpu")), str(C.inventory_known_hosts(inv)), timeout=5).close()


def _fabric(inv: C.Inventory) -> None:
    c = fleet.connection_for(inv, inv.node("gpu"))
    assert isinstance(c, fabric.Connection)
    try:
        c.open()
    finally:
        c.close()


PATHS = [_converge, _tunnel, _fabric]
IDS = ["converge", "tunnel", "fabric"]


@pytest.mark.parametrize("login", PATHS, ids=IDS)
def test_both_paths_offer_the_named_key_and_log_in(
        login: object, keys: tuple[paramiko.RSAKey, Path], tmp_path: Path, no_agent: None) -> None:
    key, path = keys
    server = Server(accept=key.asbytes())
    try:
        login(_inventory(tmp_path, server.port, str(path), _known(server)))  # type: ignore[operator]
    finally:
        server.close()
    assert server.recorder.offered == [("root", key.get_base64())]


@pytest.mark.parametrize("login", PATHS, ids=IDS)
def test_both_paths_refuse_the_same_way_when_the_key_is_rejected(
        login: object, keys: tuple[paramiko.RSAKey, Path], tmp_path: Path, no_agent: None) -> None:
    key, path = keys
    server = Server(accept=None)
    try:
        with pytest.raises(AuthError, match=rf"authentication failed as root \(tried: {path}\)"):
            login(_inventory(tmp_path, server.port, str(path), _known(server)))  # type: ignore[operator]
    finally:
        server.close()
    assert server.recorder.offered == [("root", key.get_base64())]


def test_a_server_that_drops_the_login_is_transient_not_a_refused_key(
        keys: tuple[paramiko.RSAKey, Path], tmp_path: Path, no_agent: None) -> None:
    """A booting host's sshd closes the connection at the key instead of refusing it: that is
    worth a retry (ssh.retry.transient), where a refused key is not. It was reported as
    'authentication failed', so a booting host was never retried."""
    _, path = keys
    server = Server(accept=None, recorder=Dropper(None))
    try:
        with pytest.raises(paramiko.SSHException) as got:
            _converge(_inventory(tmp_path, server.port, str(path), _known(server)))
    finally:
        server.close()
    assert not isinstance(got.value, AuthError)
    assert transient(str(got.value)), got.value


@pytest.mark.parametrize("login", PATHS, ids=IDS)
def test_both_paths_refuse_an_unknown_host_key_before_offering_any_key(
        login: object, keys: tuple[paramiko.RSAKey, Path], tmp_path: Path, no_agent: None) -> None:
    key, path = keys
    server = Server(accept=key.asbytes())
    try:
        with pytest.raises(HostKeyError, match="unknown host key"):
            login(_inventory(tmp_path, server.port, str(path)))  # type: ignore[operator]
    finally:
        server.close()
    assert server.recorder.offered == []


# --- with a real ssh-agent ------------------------------------------------------------------

@pytest.fixture()
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, list[paramiko.RSAKey]]]:
    """An ssh-agent of our own holding two keys; HOME moved so no default key of the
    machine's is found."""
    import shutil
    import subprocess

    if not (shutil.which("ssh-agent") and shutil.which("ssh-add")):
        pytest.skip("no ssh-agent on this machine")
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sock.exists():
                break
            threading.Event().wait(0.05)
        keys = []
        for i in range(2):
            k = paramiko.RSAKey.generate(1024)
            path = tmp_path / f"agent{i}"
            k.write_private_key_file(str(path))
            subprocess.run(["ssh-add", "-q", str(path)], env={"SSH_AUTH_SOCK": str(sock)},
                           check=True, capture_output=True)
            keys.append(k)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        yield sock, keys
    finally:
        proc.terminate()
        proc.wait()


@pytest.mark.parametrize("login", [_converge, _tunnel], ids=["converge", "tunnel"])
def test_an_encrypted_identity_is_used_through_the_agent_and_no_other_agent_key(
        login: object, agent: tuple[Path, list[paramiko.RSAKey]], tmp_path: Path) -> None:
    _, (_other, mine) = agent  # the agent holds _other first: it must not be offered
    identity = tmp_path / "id_locked"
    mine.write_private_key_file(str(identity), password="pw")
    (tmp_path / "id_locked.pub").write_text(f"{mine.get_name()} {mine.get_base64()}\n")
    server = Server(accept=mine.asbytes())
    try:
        login(_inventory(tmp_path, server.port, str(identity), _known(server)))  # type: ignore[operator]
    finally:
        server.close()
    assert server.recorder.offered == [("root", mine.get_base64())]


@pytest.mark.parametrize("login", [_converge, _tunnel], ids=["converge", "tunnel"])
def test_a_readable_identity_is_offered_alone_even_with_an_agent(
        login: object, agent: tuple[Path, list[paramiko.RSAKey]], keys: tuple[paramiko.RSAKey, Path],
        tmp_path: Path) -> None:
    _, agent_keys = agent
    key, path = keys
    server = Server(accept=agent_keys[0].asbytes())  # only an agent key would be let in
    try:
        with pytest.raises(AuthError):
            login(_inventory(tmp_path, server.port, str(path), _known(server)))  # type: ignore[operator]
    finally:
        server.close()
    assert server.recorder.offered == [("root", key.get_base64())]


# --- the first hop's socket -------------------------------------------------------------------

@pytest.mark.parametrize("via", [False, True], ids=["direct", "through a bastion"])
def test_the_first_hops_socket_has_nagle_off(
        via: bool, keys: tuple[paramiko.RSAKey, Path], tmp_path: Path, no_agent: None) -> None:
    """paramiko writes each SSH packet on its own; with Nagle on, a write that followed
    another waited for the server's delayed ACK (40 ms) on nearly every round trip of a
    handshake, an authentication and a channel open, on both hops of a jump chain (the inner
    hop's packets ride the first hop's socket). `provision exec` of one host spent ~150 ms
    of its ~0.5 s of SSH on that."""
    key, path = keys
    server = Server(accept=key.asbytes())
    inv = _inventory(tmp_path, server.port, str(path), _known(server), via=via)
    try:
        with C.Gateways() as gateways:
            if via:  # the bastion hop the hosts behind it share
                store = C.KnownHosts(C.inventory_known_hosts(inv), False)
                first = gateways.hop(tuple(inv.chain(inv.node("gpu"))), store).transport.sock
                chain = None
            else:
                chain = C.connect(inv, inv.node("gpu"), gateways=gateways)
                first = chain.conn.transport.sock
            assert isinstance(first, socket.socket)
            assert first.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            if L.QUICKACK is not None:  # and our ACKs go at once (test_quickack.py)
                assert isinstance(first, L.QuickAckSocket)
            if chain is not None:
                chain.close()
    finally:
        server.close()


# --- a Fabric connection on a run's open bastion hop ------------------------------------------

def test_a_fabric_connection_rides_on_the_runs_open_bastion_hop(
        keys: tuple[paramiko.RSAKey, Path], tmp_path: Path, no_agent: None) -> None:
    """What a playbook's Python task gets: a fabric.Connection to the host through the run's
    shared bastion Link, already open (not a second login to the bastion), host key checked
    and the key offered as everywhere, running a command with Fabric's own `run`; closing it
    leaves the run's hop open."""
    key, path = keys
    server = Server(accept=key.asbytes())
    inv = _inventory(tmp_path, server.port, str(path), _known(server), via=True)
    try:
        with C.Gateways() as gateways:
            store = C.KnownHosts(C.inventory_known_hosts(inv), False)
            bastion = gateways.hop(tuple(inv.chain(inv.node("gpu"))), store)
            first = bastion.transport
            c = fleet.connection_for(inv, inv.node("gpu"), gateways=gateways)
            assert isinstance(c, fabric.Connection) and c.gateway.link is bastion
            assert c.run("id -un", hide=True, in_stream=False).stdout == "ran: id -un\n"
            c.close()
            assert bastion.is_connected and bastion.transport is first
    finally:
        server.close()
    # one login to the bastion, one to the host through its direct-tcpip channel
    assert server.recorder.offered == [("root", key.get_base64())] * 2
    assert server.forwarded == [("127.0.0.1", server.port)]
