"""Fact: whether the clock is synchronised (`timedatectl show`), which time daemons run, and
whether this is a container (whose clock is the machine's kernel's). Pure parser."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from provision.frozen import frozen

from .spec import FactSpec, Rec

DAEMONS = ("chrony", "ntp", "ntpsec", "openntpd", "systemd-timesyncd")


@frozen
class TimeSync:
    container: str = ""  # "" when not probed, "none" on a machine
    show: dict[str, str] = field(default_factory=dict)  # NTP, NTPSynchronized, CanNTP
    active: tuple[str, ...] = ()  # time daemons whose unit is active

    @property
    def probed(self) -> bool:
        return bool(self.container)

    @property
    def in_container(self) -> bool:
        return self.container not in ("", "none")

    @property
    def synchronized(self) -> bool | None:
        """The kernel's clock is synchronised (adjtimex, as timedatectl reports it); None
        when timedatectl did not answer."""
        v = self.show.get("NTPSynchronized")
        return None if v is None else v == "yes"


def parse(records: Sequence[Rec]) -> TimeSync:
    container = ""
    show: dict[str, str] = {}
    active: list[str] = []
    for r in records:
        if r.kind == "tvirt":
            container = r.fields[0]
        elif r.kind == "tsync" and "=" in r.raw:
            k, _, v = r.raw.partition("=")
            show[k] = v
        elif r.kind == "tdaemon" and len(r.fields) >= 2 and r.fields[1] == "active" \
                and r.fields[0] in DAEMONS:
            active.append(r.fields[0])
    return TimeSync(container, show, tuple(active))


SPEC = FactSpec("timesync", ("tvirt", "tsync", "tdaemon"), parse)
