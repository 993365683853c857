"""Write secrets' new ciphertexts into the inventory file that declares them, in place.

Through `provision.inventory.writeback`, as a DNS record is: only the secret's own lines
change (a block scalar under `secrets:`), the result is checked (the file must load to
the same document but for the secrets written, and the whole inventory must load again
and declare exactly them), then the file is replaced atomically keeping its mode and
owner (`writeback.write`). Comments, order and style elsewhere stay as they were.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provision.inventory import writeback as wb
from provision.inventory.errors import InventoryError
from provision.inventory.model import Inventory
from provision.inventory.source import dotted, load_yaml_text

WriteBackError = wb.WriteBackError


def declaring_file(inv: Inventory) -> str:
    """The file that holds `secrets:` (else the one that holds `team:`, else the first)."""
    for key in ("secrets", "team", "version"):
        pos = inv.positions.get(dotted((key,)))
        if pos is not None:
            return pos[0]
    return inv.source.split(",")[0]


def _block_end(lines: list[str], first: int, column: int) -> int:
    """The index after the last line of the entry whose key is on line `first` (0-based)
    at `column` (1-based): the lines below it that are blank or indented deeper."""
    i = first + 1
    while i < len(lines) and (not lines[i].strip() or
                              len(lines[i]) - len(lines[i].lstrip(" ")) >= column):
        i += 1
    while i > first + 1 and not lines[i - 1].strip():
        i -= 1  # blank lines after the entry stay where they are
    return i


def _entry(name: str, armored: str, indent: int) -> list[str]:
    pad = " " * indent
    return [f"{pad}{name}: |\n", *(f"{pad}{pad}{ln}\n" for ln in armored.strip().split("\n"))]


def rewrite(text: str, file: str, updates: Mapping[str, str]) -> str:
    """`text` with each secret of `updates` (name -> armored) set: an existing entry's lines
    replaced, a new one added at the end of `secrets:` (made at the end of the file when
    there is none). Only those lines change: ruamel.yaml's splice (writeback) indents an
    inserted line like the line before it, which is wrong for a new block. Checked: the
    result must load to the same document but for these secrets. Raises WriteBackError."""
    try:
        before = load_yaml_text(text, file)
    except InventoryError as e:
        raise WriteBackError(f"{file} does not load: {e}") from None
    if not isinstance(before.data, dict):
        raise WriteBackError(f"{file}: not a mapping at the top")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for name, armored in updates.items():
        doc = load_yaml_text("".join(lines), file)
        top = doc.positions.get(("secrets",))
        table = doc.data.get("secrets")
        if top is not None and not isinstance(table, dict):
            raise WriteBackError(f"{file}:{top.line}: 'secrets' is not a block mapping; not "
                                 "rewritten")
        here = doc.positions.get(("secrets", name))
        children = [doc.positions[("secrets", k)] for k in (table or {})
                    if ("secrets", k) in doc.positions]
        indent = (children[0].column - 1) if children else 2
        if here is not None:
            end = _block_end(lines, here.line - 1, here.column + 1)
            lines[here.line - 1:end] = _entry(name, armored, here.column - 1)
        elif top is not None and children:
            last = max(children, key=lambda p: p.line)
            end = _block_end(lines, last.line - 1, last.column + 1)
            lines[end:end] = _entry(name, armored, indent)
        elif top is not None:
            if not lines[top.line - 1].rstrip().endswith(("secrets:", "{}")):
                raise WriteBackError(f"{file}:{top.line}: 'secrets' is written in a form this "
                                     "edit does not rewrite; not rewritten")
            lines[top.line - 1] = lines[top.line - 1].replace("{}", "").rstrip() + "\n"
            lines[top.line:top.line] = _entry(name, armored, indent)
        else:
            lines += ["secrets:\n", *_entry(name, armored, indent)]
    new = "".join(lines)
    expect: Any = json.loads(json.dumps(before.data))
    expect["secrets"] = {**(expect.get("secrets") or {}),
                         **{n: a.strip() + "\n" for n, a in updates.items()}}
    try:
        after = load_yaml_text(new, file)
    except InventoryError as e:
        raise WriteBackError(f"{file}: rewritten, it does not load ({e}); not written") from None
    if after.data != expect:
        raise WriteBackError(f"{file}: rewritten, it would change more than the secrets; not "
                             "written")
    return new


def prepare(inv: Inventory, updates: Mapping[str, str]) -> wb.Edit:
    """The checked edit (nothing written). Raises WriteBackError."""
    file = declaring_file(inv)
    p = Path(os.path.realpath(file))
    try:
        raw = p.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise WriteBackError(f"{file}: cannot read it: {getattr(e, 'strerror', 'not UTF-8')}") from None
    if "\r" in raw:
        raise WriteBackError(f"{file}: CRLF line endings; not rewritten")
    new = rewrite(raw, file, updates)
    reloaded = wb._load_with(inv, p, new, file)
    have = dict(reloaded.secrets)
    if any(have.get(n, "").rstrip("\n") != a.rstrip("\n") for n, a in updates.items()):
        raise WriteBackError(f"{file}: rewritten, the inventory would not declare the new "
                             "ciphertexts; not written")
    if not os.access(p, os.W_OK) or not os.access(p.parent, os.W_OK | os.X_OK):
        raise WriteBackError(f"{file}: the file cannot be written")
    line = next((v[1] for k, v in reloaded.positions.items() if k == "secrets"), 1)
    return wb.Edit(p, line, raw, new, tuple(updates))


def write(inv: Inventory, updates: Mapping[str, str]) -> str:
    """Write `updates` into the inventory; the file written."""
    edit = prepare(inv, updates)
    wb.write(edit)
    return str(edit.file)
