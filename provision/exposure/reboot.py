"""A reboot the host is waiting for (`audit`; pure): with `updates.reboot: never` (the GPU
default) unattended-upgrades never reboots, so a kernel or driver upgrade waits in
/var/run/reboot-required (its mtime: since when; reboot-required.pkgs: which packages)
until someone reboots. With a reboot time, a request older than a day means the automatic
reboot did not happen."""

from __future__ import annotations

import time

from provision.facts.updates import UpdatesFact
from provision.finding import Finding
from provision.inventory.apt_policy import REBOOT_NEVER
from provision.inventory.model import Host

FEW = 8
LATE = 26 * 3600  # a reboot time passed at least once since the request, with slack


def _when(epoch: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


def reboot_findings(host: Host, fact: UpdatesFact) -> list[Finding]:
    if fact.reboot_since is None:
        return []
    pkgs = list(fact.reboot_packages)
    names = ", ".join(pkgs[:FEW]) + (f" and {len(pkgs) - FEW} more" if len(pkgs) > FEW else "")
    waiting = f": {names} waiting" if pkgs else ""
    days = max(0, fact.now - fact.reboot_since) / 86400
    since = f"reboot required since {_when(fact.reboot_since)} ({days:.1f} days){waiting}"
    fix = (f"reboot {host.name} when its jobs allow (a GPU driver upgrade takes effect only "
           "then: until it does, CUDA fails with a driver/library mismatch)")
    if host.updates.reboot == REBOOT_NEVER:
        return [Finding("warning", "reboot-required", host.name, since, fix,
                        f"hosts.{host.name}.updates.reboot")]
    if fact.now - fact.reboot_since > LATE:
        return [Finding("warning", "reboot-overdue", host.name,
                        f"{since}; the automatic reboot at {host.updates.reboot} did not happen",
                        fix, f"hosts.{host.name}.updates.reboot")]
    return []
