"""Facts about a host: specs (a shell fragment + a pure parser each), batched into one probe.

Pure. `probe_script(request)` builds the script, `parse(text)` reads its answer into
`Facts`; the SSH side is `provision.hosts.gather`.
"""

from __future__ import annotations

from .files import TEMP_PREFIX, DirFact, FileFact
from .packages import PackageFact
from .probe import parse, probe_script
from .result import Facts
from .sockets import Socket
from .spec import FactsError, FactSpec, Request
from .system import Gpu
from .units import UnitFact
from .users import MARKER, UserFact

__all__ = [
    "MARKER", "TEMP_PREFIX", "DirFact", "FactSpec", "Facts", "FactsError", "FileFact", "Gpu",
    "PackageFact", "Request", "Socket", "UnitFact", "UserFact", "parse", "probe_script",
]
