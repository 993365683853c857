"""Facts about a host: specs (a shell fragment + a pure parser each), batched into one probe.

Pure. `probe_script(request)` builds the script, `parse(text)` reads its answer into
`Facts`; the SSH side is `provision.hosts.gather`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .files import TEMP_PREFIX, DirFact, FileFact
from .gpus import Gpu
from .packages import PackageFact
from .result import Facts
from .sockets import Socket
from .spec import FactsError, FactSpec, Request
from .units import UnitFact
from .users import MARKER, UserFact

__all__ = [
    "MARKER", "TEMP_PREFIX", "DirFact", "FactSpec", "Facts", "FactsError", "FileFact", "Gpu",
    "PackageFact", "Request", "Socket", "UnitFact", "UserFact", "parse", "probe_script",
]

if TYPE_CHECKING:
    from .probe import parse, probe_script


def __getattr__(name: str) -> Any:
    # the probe imports every fact's module (the registry, ~0.1 s): `plan` and `apply`
    # check the playbook, whose steps name fact types, before they open connections, and
    # need the probe only once those are under way
    if name in ("parse", "probe_script"):
        from . import probe

        return getattr(probe, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
