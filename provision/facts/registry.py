"""Every fact spec the probe knows, in the order the probe runs them. Pure."""

from __future__ import annotations

from typing import Any

from . import (
    addresses,
    apt,
    apt_pins,
    credentials,
    docker,
    door,
    files,
    gpus,
    guards,
    iptables,
    jupyter_auth,
    kernel,
    listeners,
    packages,
    python_envs,
    sockets,
    sshd_config,
    sshd_effective,
    sysctl,
    system,
    tcpstates,
    timesync,
    units,
    updates,
    users,
)
from .spec import FactSpec

SPECS: tuple[FactSpec[Any], ...] = (system.SPEC, files.SPEC, users.SPEC, units.SPEC,
                                    packages.SPEC, apt.SPEC, apt_pins.SPEC, python_envs.SPEC, sockets.SPEC,
                                    # provision audit
                                    listeners.SPEC, tcpstates.SPEC, sysctl.SPEC, iptables.SPEC,
                                    # sshd_config first: its fragment tells sshd_effective's whether any Match exists
                                    sshd_config.SPEC, sshd_effective.SPEC, docker.SPEC,
                                    jupyter_auth.SPEC,
                                    door.SPEC,  # the door (provision.steps.door)
                                    # shell steps' creates:/unless: (provision.steps.command)
                                    guards.SPEC,
                                    # clusters: which interface holds a member's address
                                    addresses.SPEC,
                                    # services' secrets (provision.secrets.delivery)
                                    credentials.SPEC,
                                    # the kernel baseline (provision.steps.kernel), the clock
                                    kernel.SPEC, timesync.SPEC,
                                    # the NVIDIA GPUs: plan's line and members' `gpus`, audit's findings
                                    gpus.SPEC,
                                    # unattended-upgrades (provision.steps.updates, audit)
                                    updates.SPEC)
BY_NAME: dict[str, FactSpec[Any]] = {s.name: s for s in SPECS}
