"""Every rendered file: the one Jinja environment (`env`), what lands on a node (`host`),
the operator's ssh_config (`ssh_config`), and `write_tree` (the only I/O, in `tree`)."""

from __future__ import annotations

from provision.errors import RenderError

from .artifact import Artifact
from .host import (
    FIREWALL_SCRIPT,
    FIREWALL_UNIT,
    SSHD_DROPIN,
    exec_start,
    host_directories,
    jupyter_config_path,
    render_host,
    team_directories,
)
from .ssh_config import render_ssh_config
from .tree import write_tree

__all__ = [
    "FIREWALL_SCRIPT", "FIREWALL_UNIT", "SSHD_DROPIN", "Artifact", "RenderError", "exec_start",
    "host_directories", "jupyter_config_path", "render_host", "render_ssh_config", "team_directories",
    "write_tree",
]
