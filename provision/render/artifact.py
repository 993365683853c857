"""An artifact: one rendered file and where it lands. Its own module so every renderer of
a node's files (host.py, apt.py) names it without importing the others."""

from __future__ import annotations

from provision.frozen import frozen


@frozen
class Artifact:
    """One file that lands on a node (or, for ssh_config, on the operator's machine)."""

    path: str  # absolute remote path
    content: str
    kind: str  # sshd | iptables-v4 | iptables-v6 | iptables-docker-v4 | iptables-docker-v6 |
    #            firewall-script | unit | unit-dropin | jupyter-config | apt-source | apt-key
    mode: int = 0o644
    owner: str = "root"
    group: str = "root"
    service: str | None = None  # the systemd unit to reload/restart when this changes
