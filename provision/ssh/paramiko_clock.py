"""paramiko's timeouts on a clock that only moves forward.

paramiko decides its timeouts with `time.time()`, the wall clock (paramiko/paramiko#2045;
its fix, #2046, is not merged as of paramiko 5.1). A step of the clock while a channel
opens or a login waits (NTP setting a laptop's clock after sleep, a VM's clock set again
by its host) fails that wait at once, "Timeout opening channel.", however fast the
server answered: `make test` saw it in the lab, a tunnel refused after 3.6 s against a
10 s timeout. Every `time.time()` in the modules below measures a duration, so they get a
`time` whose `time()` is the wall clock at import carried forward by `time.monotonic()`;
the rest of the module is the real one. SFTP's file times (absolute) are in modules left
alone.
"""

from __future__ import annotations

import importlib
import time
import types
from typing import Any

# the paramiko modules whose every time.time() is the start or the end of a wait
MODULES = ("paramiko.transport", "paramiko.auth_handler", "paramiko.packet",
           "paramiko.channel", "paramiko.buffered_pipe", "paramiko.proxy")


class MonotonicTime(types.ModuleType):
    """`time`, with `time()` moving with `time.monotonic()` only."""

    def __init__(self) -> None:
        super().__init__("time")
        self.origin = time.time() - time.monotonic()

    def time(self) -> float:
        return self.origin + time.monotonic()

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


CLOCK = MonotonicTime()


def install() -> None:
    """Give MODULES the clock (idempotent; imports them, which `import paramiko` does too)."""
    for name in MODULES:
        importlib.import_module(name).time = CLOCK  # type: ignore[attr-defined]
