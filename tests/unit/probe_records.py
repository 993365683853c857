"""Build probe answers (the text `templates/facts-probe.sh` prints) for diff tests."""

from __future__ import annotations

import base64
import hashlib


def file_rec(path: str, content: str, mode: str = "644", owner: str = "root",
             group: str = "root", mtime: int = 1700000000) -> str:
    sha = hashlib.sha256(content.encode()).hexdigest()
    b64 = base64.b64encode(content.encode()).decode() or "."
    return f"file\t{path}\t{sha}\t{mode}\t{owner}\t{group}\t{mtime}\t{b64}"


def user_rec(name: str, uid: int = 1001, home: str | None = None, shell: str = "/bin/bash",
             expire: str = "-", group: str | None = None, comment: str = "provision") -> str:
    """An account as the probe reports it; by default one that provision created."""
    return (f"user\t{name}\t{uid}\t{group or name}\t{home or '/home/' + name}\t{shell}\t{expire}"
            f"\t{group or name}\t{comment}")


def unit_block(unit: str, active: str = "active", enabled: str = "enabled",
               since: int = 1700000100, reload: str = "no") -> list[str]:
    return [f"unit\tId={unit}", "unit\tLoadState=loaded", f"unit\tUnitFileState={enabled}",
            f"unit\tActiveState={active}", f"unit\tNeedDaemonReload={reload}",
            f"unit\tActiveEnterTimestamp=@{since}", "unit\t"]


def answer(*records: str | list[str]) -> str:
    lines = ["probe\t1", "id\t0"]
    for r in records:
        lines.extend(r if isinstance(r, list) else [r])
    return "\n".join([*lines, "end", ""])
