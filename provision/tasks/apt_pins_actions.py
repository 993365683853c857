"""The actions of pinned and held packages, as plain data (pure; their shell is
`provision.tasks.apt_pins_script`)."""

from __future__ import annotations

from provision.record import record


@record
class InstallPinned:
    """Install packages at their pinned versions: (name, version glob) pairs."""

    pins: tuple[tuple[str, str], ...]
    lock_timeout: int = 300

    def describe(self) -> str:
        return "apt-get install " + " ".join(f"{n} (pinned {v})" for n, v in self.pins)


@record
class AptHolds:
    """`apt-mark hold` / `unhold` (only holds provision set are lifted)."""

    hold: tuple[str, ...] = ()
    unhold: tuple[str, ...] = ()

    def describe(self) -> str:
        return "; ".join([*([f"apt-mark hold {' '.join(self.hold)}"] if self.hold else []),
                          *([f"apt-mark unhold {' '.join(self.unhold)}"] if self.unhold else [])])
