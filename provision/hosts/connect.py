"""SSH connections from the inventory: a Fabric Connection per host, its gateway chain
built hop by hop (bastions outermost first), and host keys verified against known_hosts.

Fabric hard-codes paramiko's AutoAddPolicy; we replace it on every hop with a policy that
refuses unknown keys (or, with accept_new, records them like OpenSSH's
StrictHostKeyChecking=accept-new). A changed key is always refused: paramiko raises
BadHostKeyException before any policy is asked. Never share a chain between threads
(fabric #2262): call `connect()` once per host thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.inventory.model import Host, Inventory

CONNECT_TIMEOUT = 10
_append_lock = threading.Lock()


class HostKeyError(Exception):
    """A host key we refuse: unknown (without accept-new) or changed."""


def known_hosts_path(inv: Inventory) -> Path:
    return Path(os.path.expanduser(inv.known_hosts or "~/.ssh/known_hosts"))


def host_key_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


class RefuseUnknown:
    """Policy for keys that are not in known_hosts: refuse, or record them (accept-new)."""

    def __init__(self, path: Path, accept_new: bool, label: str):
        self.path = path
        self.accept_new = accept_new
        self.label = label

    def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
        fp = _fingerprint(key)
        known = client.get_host_keys().lookup(hostname)
        if known:
            # known under another key type: treat as changed, like a key swap would look
            raise HostKeyError(
                f"{self.label}: host key for {hostname} is {key.get_name()} {fp}, but "
                f"{self.path} holds a different key ({', '.join(known.keys())}) for it; "
                "refusing (remove the old entry with `ssh-keygen -R` if the change is expected)")
        if not self.accept_new:
            raise HostKeyError(
                f"{self.label}: unknown host key for {hostname} ({key.get_name()} {fp}); not in "
                f"{self.path}. Check the fingerprint, then run again with --accept-new to "
                "record it (like StrictHostKeyChecking=accept-new)")
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        with _append_lock:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                f.write(line)
        client.get_host_keys().add(hostname, key.get_name(), key)


def _fingerprint(key: Any) -> str:
    import base64
    import hashlib

    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


@dataclass
class Chain:
    """The open connection to a host plus the hops it rides on (closed together)."""

    host: Host
    conn: Any  # fabric.Connection
    hops: list[Any]

    def close(self) -> None:
        for c in [self.conn, *reversed(self.hops)]:
            with contextlib.suppress(Exception):  # closing a dead connection is no error
                c.close()


def _connection(inv: Inventory, node: Host, gateway: Any, accept_new: bool) -> Any:
    from fabric import Config, Connection
    from paramiko.hostkeys import HostKeys

    config = Config(overrides={"load_ssh_configs": False, "run": {"hide": True, "warn": True}},
                    lazy=True)
    key = node.identity_file or inv.identity_file
    connect_kwargs: dict[str, Any] = {"allow_agent": False, "look_for_keys": key is None,
                                      "banner_timeout": CONNECT_TIMEOUT,
                                      "auth_timeout": CONNECT_TIMEOUT}
    if key:
        connect_kwargs["key_filename"] = os.path.expanduser(key)
    c = Connection(node.address, user=node.user, port=node.port, config=config,
                   gateway=gateway if gateway is not None else False,
                   connect_timeout=CONNECT_TIMEOUT, connect_kwargs=connect_kwargs)
    path = known_hosts_path(inv)
    keys = HostKeys()
    if path.exists():
        keys.load(str(path))
    c.client._host_keys = keys  # what SSHClient.connect consults (no system keys loaded)
    c.client.set_missing_host_key_policy(RefuseUnknown(path, accept_new, node.name))
    return c


def connect(inv: Inventory, host: Host, accept_new: bool = False) -> Chain:
    """Open the connection to `host` through its bastions. Raises on any failure
    (HostKeyError, paramiko.BadHostKeyException, socket/auth errors)."""
    hops: list[Any] = []
    gateway = None
    for bastion in inv.chain(host):
        gateway = _connection(inv, bastion, gateway, accept_new)
        hops.append(gateway)
    conn = _connection(inv, host, gateway, accept_new)
    chain = Chain(host, conn, hops)
    try:
        conn.open()
    except BaseException:
        chain.close()
        raise
    return chain
