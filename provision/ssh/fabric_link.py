"""A `fabric.Connection` over the one SSH link (I/O): for the Fabric API (`provision.fleet`)
and the Python tasks of a playbook (`provision.hosts.task_fabric`).

The hop is a `provision.ssh.link.Link`: it opens the connection (host keys through
`KnownHosts`, keys offered by `key_offer`, the jump chain over `ChannelSocket`s), and the
Fabric connection runs on its paramiko client (`run`, `sudo`, `put`, `get`, `sftp`,
`forward_local`...). Several Fabric connections may wrap one Link (a bastion shared by a
`ThreadingGroup`'s hosts, or a run's already open hop): they share its transport and its
thread-safe `open`. Fabric's public API only: a subclass that overrides `open` and `close`,
and sets the public `client` and `transport` attributes.

This module imports Fabric (and with it invoke, ~0.15 s of start-up): only the fleet API and
a playbook with Python tasks import it.
"""

from __future__ import annotations

from typing import Any

from fabric import Config, Connection

from .link import Link


def fabric_config(**overrides: Any) -> Config:
    """A Fabric Config that reads no ssh_config file (the inventory says how to connect)."""
    return Config(overrides={"load_ssh_configs": False, **overrides}, lazy=True)


class FabricLink(Connection):
    """A fabric.Connection whose connection is `link`'s: `open` opens the link (and its
    gateways), `close` closes it."""

    link: Link | None = None  # declared here: Fabric turns unknown attributes into config

    def __init__(self, link: Link, config: Config | None = None) -> None:
        config = config or fabric_config()
        gateway = None if link.gateway is None else FabricLink(link.gateway, config)
        super().__init__(link.host, user=link.user, port=link.port, config=config,
                         gateway=gateway if gateway is not None else False,
                         connect_timeout=max(1, int(link.settings.timeout)))
        self.link = link
        self.client = link.client
        self.transport = link.transport

    def open(self) -> None:
        assert self.link is not None
        self.link.open()
        self.transport = self.link.transport

    def close(self) -> None:
        super().close()  # its SFTP session, the agent forwarding
        assert self.link is not None
        self.link.close()


def fabric_connection(link: Link, config: Config | None = None) -> Connection:
    """`link` as a `fabric.Connection` (opened on first use, if `link` is not yet open);
    `config`: a Fabric Config for `run`/`sudo` defaults (default: `fabric_config()`)."""
    return FabricLink(link, config)
