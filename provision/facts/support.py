"""Which hosts provision converges, decided from the probe's facts. Pure.

provision writes systemd units, installs with apt, and hardens sshd with a drop-in in
`/etc/ssh/sshd_config.d`; a host without one of these would be half-converged (the users
step done, the services step failing) or, worse, "hardened" by a file sshd never reads. So
such a host is refused before anything changes, with the reason. Only what the probe
actually reported counts: a fact that was not probed refuses nothing.
"""

from __future__ import annotations

from .sshd_config import SshdConfig, included
from .system import System

DEBIAN_FAMILY = frozenset({"debian", "ubuntu"})


def os_name(system: System) -> str:
    """`ID VERSION_ID` as os-release says it, for messages ("unknown" when absent)."""
    ident = " ".join(v for v in (system.os.get("id", ""), system.os.get("version_id", "")) if v)
    return ident or "unknown (no /etc/os-release)"


def refusal(system: System) -> str | None:
    """Why provision will not converge this host at all, or None."""
    if system.os:
        family = {system.os.get("id", "").lower(), *system.os.get("id_like", "").lower().split()}
        if not family & DEBIAN_FAMILY:
            return (f"unsupported host: {os_name(system)} is not a Debian-family OS "
                    "(provision supports Debian and Ubuntu: ID or ID_LIKE debian/ubuntu in "
                    "/etc/os-release)")
    if system.caps.get("systemd") is False:
        return ("unsupported host: systemd is not the init system here (no /run/systemd/system); "
                "provision manages services and its rollback timers with systemd")
    if system.caps.get("apt") is False:
        return "unsupported host: no apt-get/dpkg; provision installs packages with apt"
    return None


def sshd_refusal(cfg: SshdConfig, dropin: str) -> str | None:
    """Why the sshd drop-in cannot work here: sshd_config does not read sshd_config.d."""
    if not cfg.files:
        return None
    if "/etc/ssh/sshd_config" not in cfg.files:
        return "unsupported host: /etc/ssh/sshd_config is missing"
    if not included(cfg, dropin):
        return (f"unsupported host: /etc/ssh/sshd_config has no `Include "
                f"/etc/ssh/sshd_config.d/*.conf` (outside any Match block), so sshd would never "
                f"read {dropin} (OpenSSH before 8.2, or a replaced sshd_config)")
    return None
