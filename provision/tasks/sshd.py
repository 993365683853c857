"""sshd hardening: the rendered drop-in vs the one on the host -> one commit-confirmed change.

Pure. The drop-in comes from `provision.render` (kind "sshd"); it is validated on the host
with `sshd -t -f` against a temporary full config before anything is replaced, installed
atomically, sshd reloaded, and confirmed over a new connection (see `provision.tasks.commit`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provision.facts import Facts, Request
from provision.inventory.model import Host, Inventory

from .actions import WriteFile
from .commit import CommitConfirmed, Staged
from .files import sha256


@dataclass(frozen=True)
class SshdStep:
    inv: Inventory
    host: Host
    name: str = "sshd"
    artifact: Any = field(default=None, compare=False)

    @classmethod
    def build(cls, inv: Inventory, host: Host) -> SshdStep:
        from provision.render import render_host

        (artifact,) = [a for a in render_host(inv, host) if a.kind == "sshd"]
        return cls(inv, host, artifact=artifact)

    @property
    def content(self) -> str:
        return str(self.artifact.content)

    def request(self) -> Request:
        return Request(files=(self.artifact.path,), units=(self.artifact.service,))

    def diff(self, facts: Facts) -> list[CommitConfirmed]:
        a = self.artifact
        fact = facts.file(a.path)
        want = WriteFile(a.path, self.content, a.mode, a.owner, a.group,
                         old=fact.content if fact.kind == "file" else None)
        reasons: list[str] = []
        if fact.kind != "file":
            reasons.append("drop-in missing")
        elif fact.sha256 != sha256(want.content):
            reasons.append("drop-in differs")
        elif (fact.mode, fact.owner, fact.group) != (a.mode, a.owner, a.group):
            reasons.append("drop-in mode/owner differs")
        if not reasons:
            return []
        # a commit-confirmed change: run by provision.hosts.confirm, not the plain batch
        return [CommitConfirmed("sshd", self.host.name, (Staged(want, "sshd"),), a.service,
                                reasons=tuple(reasons))]

