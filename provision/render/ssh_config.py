"""The operator's ssh_config: a Host block per bastion and host, ProxyJump chains and the
LocalForwards of tunnel services. Pure: the model in, text out."""

from __future__ import annotations

import os

from provision.inventory.forwards import local_forwards
from provision.inventory.model import Inventory

from .env import render as _render


def render_ssh_config(inv: Inventory, *, user: str | None = None, identity_file: str | None = None,
                      known_hosts: str | None = None) -> str:
    """The ssh_config for the whole inventory: a block per bastion and host, defaults last.

    `user`/`identity_file` override the login for every block (team members:
    `provision tunnel --user alice`); with `user` alone, the team member's own
    `identity_file` from the inventory is used when there is one.
    """
    if user is not None and identity_file is None:
        person = next((p for p in inv.team if p.name == user), None)
        identity_file = person.identity_file if person else None
    nodes = (*sorted(inv.bastions, key=lambda h: h.name), *sorted(inv.hosts, key=lambda h: h.name))
    blocks = []
    for node in nodes:
        forwards = local_forwards(node, user)
        blocks.append({
            "name": node.name,
            "hostname": node.address,
            "user": user or node.user,
            "port": node.port,
            "identity_file": identity_file or node.identity_file,
            "proxy_jump": [b.name for b in inv.chain(node)],
            "forwards": forwards,
        })
    return _render("ssh_config.j2", source=_source_name(inv), blocks=blocks,
                   names=[n.name for n in nodes], known_hosts=known_hosts or inv.known_hosts)


def _source_name(inv: Inventory) -> str:
    return ",".join(os.path.basename(s.rstrip("/")) for s in inv.source.split(",")) or "inventory"
