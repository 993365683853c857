"""The door's action and its shell for the batch (pure): certificates made on the host
when missing, key maps and config written beside the live ones, the config checked by
HAProxy, then put in place, reloaded and read back (`templates/steps/door.sh`)."""

from __future__ import annotations

import functools
from importlib.resources import files
from shlex import quote

from provision.door import paths
from provision.frozen import frozen

from .action import Action, Lib
from .actions import WriteFile


@functools.cache
def lib() -> str:
    return (files("provision._templates") / "steps" / "door.sh").read_text("utf-8")


DOOR = Lib(50, "door", lib)  # the library its fragment calls, last of the batch's


@frozen
class DoorApply(Action):
    """Make the door serve `digest`: `writes` are (path, content, mode) written before the
    check (the candidate config goes to CONFIG.new); `remove`: maps the old config used."""

    digest: str
    certs: tuple[str, ...]  # names whose key or certificate files are missing
    writes: tuple[tuple[str, str, int], ...]
    unit_changed: bool
    ports: tuple[int, ...]
    remove: tuple[str, ...]
    why: str

    libs = (DOOR,)

    def script(self) -> str:
        return snippet(self, "\n".join(WriteFile(p, c, m).script() for p, c, m in self.writes))

    def describe(self) -> str:
        made = f"; make a key and a self-signed certificate for {', '.join(self.certs)}" if self.certs else ""
        return (f"door: config {self.digest[:12]} on port {', '.join(map(str, self.ports))}, "
                f"checked by haproxy -c, then reloaded and read back ({self.why}){made}")


def snippet(a: DoorApply, write: str) -> str:
    """`write`: the batch's shell for one WriteFile (provision.steps.script)."""
    # `|| exit 1`: the batch may run inside a condition, where `set -e` is off
    lines = [f"provision_safe_path {quote(paths.DOOR_DIR)} || exit 1",
             f"mkdir -p {quote(paths.DOOR_DIR)}", f"chmod 0700 {quote(paths.DOOR_DIR)}",
             *(f"provision_door_cert {quote(n)} || exit 1" for n in a.certs), write,
             f"provision_door_apply {quote(a.digest)} {int(a.unit_changed)} "
             f"{quote(' '.join(map(str, a.ports)))} || exit 1"]
    if a.remove:
        lines.append("provision_remove " + " ".join(quote(p) for p in a.remove))
    return "\n".join(lines)
