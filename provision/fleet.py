"""Your inventory as a Fabric fleet: the public Python API.

    from provision import fleet

    inv = fleet.load("inventory.yml")
    with fleet.Fleet(inv) as f:
        for host in f.select(["role:gpu-server"]):
            f.connection(host).run("nvidia-smi -L")   # the host's output shown, escaped
        f.group(["all"]).run("uptime")

Connections are plain `fabric.Connection` objects over the one SSH link
(`provision.ssh.fabric_link`: the hop is a `provision.ssh.link.Link`), wired through the
host's jump chain, logged in with the inventory's users and identity
files (or a team member's, `user=`), host keys checked against the inventory's
known_hosts by the same trust path `provision apply` uses (nothing accepted on trust
unless `accept_new=True`), keys offered as `provision.ssh.auth` says. The bastions of one
`Fleet` are opened once and shared by every host behind them.

What a host prints reaches the terminal escaped (`provision.ssh.fabric_link`): `run`,
`sudo` and `shell` echo its output through `provision.text`, and so do the messages of
their failures. `Result.stdout` and `.stderr` are the host's raw text: print them through
`provision.text.printable`. `raw_output=True` gives Fabric's own, unescaped echo. See
docs/fleet-api.md.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from fabric import Config, Connection, ThreadingGroup

from provision.inventory import load_inventory
from provision.inventory.model import Host, Inventory
from provision.selection import HostSelectionError, select
from provision.ssh.connect import Gateways, inventory_known_hosts
from provision.ssh.fabric_link import escaped_config, fabric_config, fabric_connection
from provision.ssh.hostkeys import KnownHosts
from provision.ssh.link import Link, connection
from provision.ssh.login import DEFAULT_LOGIN, Login, choose_login, hop

__all__ = ["Fleet", "HostSelectionError", "connection_for", "load", "select"]


def load(path: str | os.PathLike[str] | None = None) -> Inventory:
    """Load and validate an inventory (a file or a directory; None: the CLI's default
    lookup). Raises provision.inventory.InventoryError listing every problem."""
    return load_inventory(None if path is None else str(path))


def connection_for(inv: Inventory, host: Host, *, login: Login = DEFAULT_LOGIN,
                   accept_new: bool = False, gateways: Gateways | None = None,
                   config: Config | None = None, raw_output: bool = False) -> Connection:
    """A `fabric.Connection` to `host` through its jump chain, not yet opened (Fabric
    opens it on first use). Its bastion hops come from `gateways` (a run's shared, already
    open hops: `provision.ssh.connect.Gateways`), else are new ones owned by this
    connection. `config`: a Fabric Config for `run`/`sudo` defaults. Host output is
    echoed escaped unless `raw_output`."""
    config = _config(config, raw_output)
    store = KnownHosts(inventory_known_hosts(inv), accept_new)
    chain = inv.chain(host)
    gateway: Link | None = None
    if chain and gateways is not None:
        gateway = gateways.hop(chain, store, login)
    else:
        for b in chain:
            gateway = connection(hop(b, login), store, gateway=gateway)
    return fabric_connection(connection(hop(host, login), store, gateway=gateway), config)


def _config(config: Config | None, raw_output: bool) -> Config:
    """The Config the connections get: the caller's (its runners made to escape host output,
    unless `raw_output`), else provision's."""
    if config is None:
        return fabric_config(raw_output=raw_output)
    return config if raw_output else escaped_config(config)


class Fleet:
    """Connections to an inventory's hosts that share their bastion hops; close it (or use
    it as a context manager) to close every connection it made, bastions last.

    `user`: log in as this team member (with their identity_file) or login user, as
    `--user` does; default: `$USER` when it names a team member, else each host's user.
    `raw_output`: echo host output as Fabric does, unescaped (escape sequences and all);
    default: escaped, whatever `config` is.
    """

    def __init__(self, inv: Inventory, *, user: str | None = None, accept_new: bool = False,
                 config: Config | None = None, raw_output: bool = False) -> None:
        self.inv = inv
        self.login = choose_login(inv, user, os.environ.get("USER"))
        self.config = _config(config, raw_output)
        self._store = KnownHosts(inventory_known_hosts(inv), accept_new)
        self._lock = threading.Lock()
        self._bastions: dict[str, Link] = {}
        self._hosts: list[Connection] = []
        self._names: dict[int, str] = {}

    def select(self, patterns: Iterable[str] = ()) -> tuple[Host, ...]:
        return select(self.inv, patterns)

    def _bastion(self, chain: Sequence[Host]) -> Link | None:
        gateway: Link | None = None
        with self._lock:
            for b in chain:
                c = self._bastions.get(b.name)
                if c is None:
                    c = self._bastions[b.name] = connection(hop(b, self.login), self._store,
                                                            gateway=gateway)
                gateway = c
        return gateway

    def connection(self, host: Host | str) -> Connection:
        """A new (unopened) `fabric.Connection` to `host` (a Host or its name) through the
        fleet's shared bastions."""
        node = self.inv.node(host) if isinstance(host, str) else host
        c = fabric_connection(connection(hop(node, self.login), self._store,
                                         gateway=self._bastion(self.inv.chain(node))), self.config)
        with self._lock:
            self._hosts.append(c)
            self._names[id(c)] = node.name
        return c

    def name(self, conn: Connection) -> str:
        """The inventory name of a connection this fleet made (Fabric knows the address)."""
        return self._names.get(id(conn), str(conn.host))

    def group(self, patterns: Iterable[str] = ()) -> ThreadingGroup:
        """A `fabric.ThreadingGroup` of the selected hosts (each host runs in a thread of
        its own; the bastion hops are shared and opened once)."""
        group: ThreadingGroup = ThreadingGroup.from_connections(
            [self.connection(h) for h in self.select(patterns)])
        return group

    def close(self) -> None:
        with self._lock:
            hosts, self._hosts = self._hosts, []
            bastions, self._bastions = list(self._bastions.values()), {}
        for c in [*hosts, *reversed(bastions)]:
            c.close()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
