"""Host firewall: the rendered chains, loader and boot unit vs the host -> one commit-confirmed
change.

Pure. Files come from `provision.render` (our own chains only, loaded with
`iptables-restore --noflush` by `provision-firewall`, restored at boot by
`provision-firewall.service`). Docker's drop-in (hooking PROVISION-DOCKER into DOCKER-USER
after Docker starts) is installed only when the facts say Docker is there. A host whose
files match, whose loader unit is enabled and active and whose live rules (`iptables-save`)
hold our chains as rendered, hooked in, with nothing before them accepting what they drop,
needs nothing.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from provision.facts import Facts, Request
from provision.facts import iptables as IPT
from provision.frozen import frozen
from provision.inventory.model import Host, Inventory
from provision.render import FIREWALL_SCRIPT, FIREWALL_UNIT, render_host

from .actions import WriteFile
from .commit import TESTED_KINDS, CommitConfirmed, Staged
from .files import sha256
from .verify import firewall_problems

KINDS = ("iptables-v4", "iptables-v6", "iptables-docker-v4", "iptables-docker-v6",
         "firewall-script", "unit", "unit-dropin")


def _wanted(a: Any) -> bool:
    return a.kind in KINDS and (a.kind != "unit" or a.service == FIREWALL_UNIT)


@frozen
class FirewallStep:
    inv: Inventory
    host: Host
    name: str = "firewall"
    artifacts: tuple[Any, ...] = field(default=(), compare=False)
    unit: str = "provision-firewall.service"
    script: str = "/usr/local/sbin/provision-firewall"

    @classmethod
    def build(cls, inv: Inventory, host: Host, *, allow_lockout: bool = False) -> FirewallStep:
        arts = tuple(a for a in render_host(inv, host, allow_lockout=allow_lockout) if _wanted(a))
        return cls(inv, host, artifacts=arts, unit=FIREWALL_UNIT, script=FIREWALL_SCRIPT)

    def request(self) -> Request:
        # the live tables too: files that are ours say nothing about the rules in force
        return Request(files=tuple(a.path for a in self.artifacts), units=(self.unit,),
                       facts=("iptables",))

    def _live(self, facts: Facts) -> list[str]:
        """Why the rules in force are not ours as rendered (nothing when not probed)."""
        ipt = facts.get(IPT.SPEC)
        saves = {fam: ipt.text(fam) for fam in (4, 6) if ipt.status(fam) == 0}
        if not saves:
            return []
        return firewall_problems([(a.kind, a.content) for a in self.selected(facts)
                                  if TESTED_KINDS.get(a.kind) in saves], saves)

    def selected(self, facts: Facts) -> tuple[Any, ...]:
        """The artifacts this host gets: Docker's drop-in only where Docker is."""
        return tuple(a for a in self.artifacts if a.kind != "unit-dropin" or facts.docker)

    def diff(self, facts: Facts) -> list[CommitConfirmed]:
        staged: list[Staged] = []
        reasons: list[str] = []
        for a in self.selected(facts):
            fact = facts.file(a.path)
            want = WriteFile(a.path, a.content, a.mode, a.owner, a.group,
                             old=fact.content if fact.kind == "file" else None)
            changed = (fact.kind != "file" or fact.sha256 != sha256(a.content)
                       or (fact.mode, fact.owner, fact.group) != (a.mode, a.owner, a.group))
            staged.append(Staged(want, a.kind, changed))
        if any(s.changed for s in staged):
            reasons.append("files differ")
        unit = facts.units.get(self.unit)
        if unit is None or not unit.enabled:
            reasons.append(f"{self.unit} not enabled")
        if unit is None or not unit.active:
            reasons.append(f"{self.unit} not active (rules not loaded)")
        if not reasons:
            reasons += [f"live rules: {p}" for p in self._live(facts)]
        if not reasons:
            return []
        # a commit-confirmed change: run by provision.hosts.confirm, not the plain batch
        return [CommitConfirmed("firewall", self.host.name, tuple(staged), self.unit,
                                script=self.script, reasons=tuple(reasons))]

