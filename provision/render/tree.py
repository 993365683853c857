"""`provision render --out DIR`: every artifact written under one directory (I/O only)."""

from __future__ import annotations

from pathlib import Path

from provision.inventory.model import Inventory

from .host import render_host
from .ssh_config import render_ssh_config


def write_tree(inv: Inventory, out_dir: Path, *, allow_lockout: bool = False) -> list[Path]:
    """Write `out_dir/ssh_config` and `out_dir/<node>/<remote path>` for every node.

    Everything is rendered before anything is written, so a RenderError leaves no files.
    Returns the written paths, sorted.
    """
    files: dict[Path, tuple[str, int]] = {out_dir / "ssh_config": (render_ssh_config(inv), 0o600)}
    for node in (*inv.bastions, *inv.hosts):
        for a in render_host(inv, node, allow_lockout=allow_lockout):
            files[out_dir / node.name / a.path.lstrip("/")] = (a.content, a.mode)
    for path, (content, mode) in sorted(files.items()):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        path.chmod(mode)
    return sorted(files)
