"""`provision rsync` (pure): which side of a spec is an inventory host, and rsync's argv
over the rendered ssh config."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence


def remote_side(spec: str, names: Iterable[str]) -> str | None:
    """The inventory host named by an rsync spec `HOST:PATH` (or `USER@HOST:PATH`), if any."""
    if ":" not in spec or spec.startswith(("/", "./", "../")):
        return None
    head = spec.split(":", 1)[0]
    name = head.rsplit("@", 1)[-1]
    return name if name in set(names) else None


def rsync_argv(rsync: str, ssh: str, config: str, known_hosts: str | None, src: str, dst: str,
               extra: Sequence[str] = ()) -> list[str]:
    ssh_cmd = [ssh, "-F", config, "-o", "ClearAllForwardings=yes", "-o", "StrictHostKeyChecking=yes"]
    if known_hosts:
        ssh_cmd += ["-o", f"UserKnownHostsFile={known_hosts}"]
    return [rsync, "-avhP", "-e", shlex.join(ssh_cmd), *extra, src, dst]
