"""The Fabric side of a playbook's Python tasks (I/O): the `fabric.Connection` a task gets.

It is the host's own connection, the `provision.ssh.link.Link` the run opened through the
jump chain (host keys checked, `provision.ssh.connect`), as a `fabric.Connection`
(`provision.ssh.fabric_link`). Imported only when a playbook has Python tasks (Fabric and
invoke cost ~0.15 s of start-up), by `provision.pytasks.load`.
"""

from __future__ import annotations

from typing import Any

from fabric import Connection
from fabric.runners import Remote

from provision.ssh.fabric_link import fabric_config, fabric_connection


def connection(chain: Any, remote: Any) -> Connection:
    """The host's open link as a `fabric.Connection`, configured for tasks: commands raise
    on a non-zero exit (warn off), their output is captured (hidden) for the recap, the
    operator's stdin is not read, and each command counts in `remote.execs` (the recap's
    remote execs: a check costs what it runs)."""

    class Counted(Remote):
        def start(self, command: str, shell: str, env: dict[str, Any],
                  timeout: int | None = None) -> Any:
            remote.execs += 1
            return super().start(command, shell, env, timeout=timeout)

    config = fabric_config(run={"warn": False, "hide": True, "in_stream": False},
                           runners={"remote": Counted})
    return fabric_connection(chain.conn, config)
