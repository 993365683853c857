"""Build probe answers (what the script of `provision.facts.probe_script` prints: one
fragment per fact from `templates/facts/*.sh`) for tests and for fixture files.

`expand` turns a fixture's `records` list into answer lines: a string is one record as it is
(`"kind\tfield\t..."`), an object is built by the function its one key names (`file`,
`user`, `unit`) with the other keys as arguments, and `{"include": NAME}` is every record of
`tests/fixtures/facts/NAME` (a whole probe answer).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path

ANSWERS = Path(__file__).parent.parent / "fixtures" / "facts"


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


def included(name: str) -> list[str]:
    """The records of a stored probe answer, without its header and `end`."""
    lines = (ANSWERS / name).read_text().split("\n")
    return [ln for ln in lines[1:] if ln and ln != "end"]


def expand(records: Sequence[str | Mapping[str, object]]) -> list[str]:
    """A fixture's `records` as answer lines (see the module docstring)."""
    out: list[str] = []
    for r in records:
        if isinstance(r, str):
            out.append(r)
            continue
        args = dict(r)
        if "include" in args:
            out += included(str(args["include"]))
        elif "file" in args:
            out.append(file_rec(str(args.pop("file")), **args))  # type: ignore[arg-type]
        elif "user" in args:
            out.append(user_rec(str(args.pop("user")), **args))  # type: ignore[arg-type]
        elif "unit" in args:
            out += unit_block(str(args.pop("unit")), **args)  # type: ignore[arg-type]
        else:
            raise ValueError(f"unknown record builder {sorted(args)} (file, user, unit, include)")
    return out


def wrap(lines: Sequence[str]) -> str:
    """Answer lines framed as the probe frames them (header first, `end` last)."""
    return "\n".join(["probe\t1", *lines, "end", ""])
