"""Managed files (pure): desired content vs the file on the host -> write, fix attributes, or nothing.
Also the clean-up of temp files an interrupted run left behind."""

from __future__ import annotations

import hashlib
from dataclasses import replace

from provision.facts import FileFact

from .actions import Action, RemoveTemps, SetAttrs, WriteFile


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogateescape")).hexdigest()


def diff_file(fact: FileFact, want: WriteFile) -> list[Action]:
    """Write when absent or different; otherwise fix mode/group when they drifted. A file
    with the wrong owner is written anew: in a member's directory the write is made as the
    member (templates/territory.sh), who cannot chown, but whose new file is theirs."""
    if fact.kind != "file":
        return [replace(want, old=None)]
    if fact.sha256 != sha256(want.content) or fact.owner != want.owner:
        return [replace(want, old=fact.content if fact.content is not None else "")]
    if (fact.mode, fact.group) != (want.mode, want.group):
        return [SetAttrs(want.path, want.mode, want.owner, want.group)]
    return []


def cleanup(temps: tuple[str, ...]) -> list[Action]:
    """Temp files of ours (`.provision-tmp.*`) found in managed directories."""
    return [RemoveTemps(tuple(temps))] if temps else []
