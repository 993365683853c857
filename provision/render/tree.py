"""`provision render --out DIR`: every artifact written under one directory (I/O only).

All or nothing: everything is rendered and the layout checked before anything is written;
the files are written into a staging directory beside DIR, then moved into place.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from provision.errors import RenderError
from provision.inventory.model import Inventory
from provision.text import printable

from .host import render_host
from .ssh_config import render_ssh_config

SSH_CONFIG = "ssh_config"


def layout(inv: Inventory, *, allow_lockout: bool = False) -> dict[Path, tuple[str, int]]:
    """Relative path -> (content, mode) of every file `write_tree` writes (pure).
    Raises RenderError when two artifacts would need the same path."""
    files: dict[Path, tuple[str, int]] = {Path(SSH_CONFIG): (render_ssh_config(inv), 0o600)}
    for node in (*inv.bastions, *inv.hosts):
        if node.name == SSH_CONFIG:
            raise RenderError(f"a node named '{SSH_CONFIG}' would put its directory where "
                              f"`render` writes the {SSH_CONFIG} file; rename the node")
        for a in render_host(inv, node, allow_lockout=allow_lockout):
            files[Path(node.name) / a.path.lstrip("/")] = (a.content, a.mode)
    dirs = {parent for p in files for parent in p.parents}
    clash = sorted(str(p) for p in files if p in dirs)
    if clash:
        raise RenderError(f"these artifacts would be both a file and a directory: {', '.join(clash)}")
    return files


def _check_merge(out_dir: Path, files: dict[Path, tuple[str, int]]) -> None:
    """Refuse, before anything is written, to merge into `out_dir` through a symlink below
    it (that would write wherever it points) or over a file where a directory goes (and
    the other way round). `out_dir` itself may be a symlink to a directory: the operator
    chose it by name."""
    problems: set[str] = set()
    for rel in files:
        parts = rel.parts
        for i in range(1, len(parts) + 1):
            p = out_dir.joinpath(*parts[:i])
            if p.is_symlink():
                problems.add(f"{printable(str(p))} is a symlink (provision writes through no "
                             "link under --out)")
                break
            if not p.exists():
                break
            if i < len(parts) and not p.is_dir():
                problems.add(f"{printable(str(p))} is a file where a directory goes")
                break
            if i == len(parts) and p.is_dir():
                problems.add(f"{printable(str(p))} is a directory where a file goes")
    if problems:
        raise RenderError(f"cannot write into --out {printable(str(out_dir))}: "
                          f"{'; '.join(sorted(problems))}; nothing was written")


def write_tree(inv: Inventory, out_dir: Path, *, allow_lockout: bool = False) -> list[Path]:
    """Write `out_dir/ssh_config` and `out_dir/<node>/<remote path>` for every node.

    A RenderError (or a failed write) leaves `out_dir` as it was. Returns the written
    paths, sorted.
    """
    files = layout(inv, allow_lockout=allow_lockout)
    if not str(out_dir).strip():  # Path("") is the current directory: never by accident
        raise RenderError("--out needs a directory (it is empty)")
    out_dir = out_dir.absolute()
    if out_dir.is_symlink() and not out_dir.exists():
        raise RenderError(f"--out {printable(str(out_dir))} is a symlink to "
                          f"{printable(os.readlink(out_dir))}, which does not exist")
    if out_dir.exists() and not out_dir.is_dir():
        raise RenderError(f"--out {printable(str(out_dir))} exists and is not a directory")
    if out_dir.is_dir():
        _check_merge(out_dir, files)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.render-", dir=out_dir.parent))
    except OSError as e:
        raise RenderError(f"cannot write under {out_dir.parent}: {e.strerror}") from None
    try:
        for rel, (content, mode) in sorted(files.items()):
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
            path.chmod(mode)
        if not out_dir.exists():
            os.replace(staging, out_dir)
        else:  # merge file by file: what else is in out_dir stays
            for rel in sorted(files):
                (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                os.replace(staging / rel, out_dir / rel)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return sorted(out_dir / rel for rel in files)
