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


def write_tree(inv: Inventory, out_dir: Path, *, allow_lockout: bool = False) -> list[Path]:
    """Write `out_dir/ssh_config` and `out_dir/<node>/<remote path>` for every node.

    A RenderError (or a failed write) leaves `out_dir` as it was. Returns the written
    paths, sorted.
    """
    files = layout(inv, allow_lockout=allow_lockout)
    out_dir = out_dir.absolute()
    if out_dir.exists() and not out_dir.is_dir():
        raise RenderError(f"--out {out_dir} exists and is not a directory")
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
