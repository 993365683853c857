"""The actions of pinned and held packages, as plain data with their shell (pure; the
library they call is `provision.steps.apt_pins_script`'s)."""

from __future__ import annotations

from shlex import quote

from provision.frozen import frozen

from .action import Action
from .apt_pins_script import PINS
from .apt_script import APT


@frozen
class InstallPinned(Action):
    """Install packages at their pinned versions: (name, version glob) pairs."""

    pins: tuple[tuple[str, str], ...]
    lock_timeout: int = 300
    libs = (APT, PINS)

    def describe(self) -> str:
        return "apt-get install " + " ".join(f"{n} (pinned {v})" for n, v in self.pins)

    def script(self) -> str:
        pairs = " ".join(f"{quote(n)} {quote(v)}" for n, v in self.pins)
        return f"if ! provision_apt_install_pinned {self.lock_timeout} {pairs}; then exit 1; fi"


@frozen
class AptHolds(Action):
    """`apt-mark hold` / `unhold` (only holds provision set are lifted)."""

    hold: tuple[str, ...] = ()
    unhold: tuple[str, ...] = ()
    libs = (PINS,)

    def describe(self) -> str:
        return "; ".join([*([f"apt-mark hold {' '.join(self.hold)}"] if self.hold else []),
                          *([f"apt-mark unhold {' '.join(self.unhold)}"] if self.unhold else [])])

    def script(self) -> str:
        lines = [f"if ! provision_apt_holds {verb} {' '.join(quote(n) for n in names)}; then exit 1; fi"
                 for verb, names in (("hold", self.hold), ("unhold", self.unhold)) if names]
        return "\n".join(lines)
