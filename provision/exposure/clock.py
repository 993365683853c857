"""Audit findings about the clock (`timesync` fact): certificates, logs across a training
cluster and TOTP codes all need a synchronised clock. Pure.

In a container the clock is the machine's kernel's, and so is the synchronised flag
timedatectl reads (adjtimex): reported as info there, to be fixed on the machine.
"""

from __future__ import annotations

from provision.facts.timesync import TimeSync
from provision.finding import Finding
from provision.inventory.model import Host

CODE = "clock-unsynchronised"


def clock_findings(host: Host, t: TimeSync) -> list[Finding]:
    if not t.probed:
        return []
    if t.synchronized is None:
        return [Finding("info", "clock-unknown", host.name,
                        "timedatectl did not answer: whether the clock is synchronised is unknown",
                        "check `timedatectl show` on the host (systemd-timedated needs D-Bus)")]
    if t.synchronized:
        return []
    if t.in_container:
        return [Finding("info", CODE, host.name,
                        f"the kernel's clock is not synchronised; this is a {t.container} "
                        "container, whose clock is the machine's (no time daemon runs in it)",
                        "synchronise the machine that runs the container (chrony or "
                        "systemd-timesyncd there)")]
    if not t.active:
        return [Finding("warning", CODE, host.name,
                        f"the clock is not synchronised and no time daemon runs (NTP="
                        f"{t.show.get('NTP', '?')})",
                        "apply the `kernel` step (it installs and starts systemd-timesyncd), "
                        "or install chrony")]
    return [Finding("warning", CODE, host.name,
                    f"the clock is not synchronised although {', '.join(t.active)} runs "
                    f"(NTP={t.show.get('NTP', '?')})",
                    "check that its NTP servers answer (UDP 123 out) and its journal")]
