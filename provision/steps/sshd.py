"""sshd hardening: the rendered drop-in vs the one on the host, and vs what sshd really
runs with -> one commit-confirmed change. Pure.

The drop-in comes from `provision.render` (kind "sshd"); it is validated on the host
with `sshd -t -f` against a temporary full config before anything is replaced, installed
atomically, sshd reloaded, its effect read back with `sshd -T` (globally and per user, see
`provision.steps.sshd_effect`) and confirmed over a new connection (`provision.steps.commit`).

A drop-in that is ours but does not take effect (an earlier file, a line above the Include,
a Match block wins) is a change too, with the reason: `plan` never says "no changes" for
it, and `apply` fails on it, naming the file and line, after rolling back.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from provision.facts import Facts, Request
from provision.facts import sshd_config as SC
from provision.facts import sshd_effective as SE
from provision.facts.support import sshd_refusal
from provision.facts.users import SPEC as users_spec
from provision.frozen import frozen
from provision.inventory import sshd_options
from provision.inventory.model import Host, Inventory
from provision.render import render_host
from provision.render.host import SSHD_DROPIN_BEFORE

from . import sshd_access
from . import sshd_effect as E
from .actions import WriteFile
from .commit import CommitConfirmed, Staged
from .files import sha256
from .refused import Refused

SOCKET = "ssh.socket"
MARK = "# Managed by provision"  # the drop-in's first line (templates/sshd_config.conf.j2)


@frozen
class SshdStep:
    inv: Inventory
    host: Host
    name: str = "sshd"
    artifact: Any = field(default=None, compare=False)

    @classmethod
    def build(cls, inv: Inventory, host: Host) -> SshdStep:
        (artifact,) = [a for a in render_host(inv, host) if a.kind == "sshd"]
        return cls(inv, host, artifact=artifact)

    @property
    def content(self) -> str:
        return str(self.artifact.content)

    @property
    def users(self) -> tuple[str, ...]:
        """Whose connections `sshd -T -C` is asked about: the operator login and the team."""
        return tuple(dict.fromkeys((self.host.user, *(p.name for p in self.inv.team))))

    @property
    def required(self) -> dict[str, str]:
        """Who must still log in here (account -> why), whatever AllowUsers/AllowGroups say."""
        return sshd_options.required_logins((*self.inv.bastions, *self.inv.hosts))[self.host.name]

    def request(self) -> Request:
        # the accounts' groups only where AllowGroups needs them (the probe stays lean)
        users = tuple(self.required) if "AllowGroups" in dict(self.host.sshd) else ()
        return Request(files=(self.artifact.path, *SSHD_DROPIN_BEFORE),
                       units=(self.artifact.service, SOCKET),
                       facts=("sshd_effective", "sshd_config"), sshd_users=self.users,
                       users=users)

    def diff(self, facts: Facts) -> list[CommitConfirmed]:
        a = self.artifact
        cfg = facts.get(SC.SPEC)
        refused = sshd_refusal(cfg, a.path)
        if refused:
            raise Refused(refused)
        refused = sshd_access.group_lockout(self.host.sshd, self.required, facts.get(users_spec))
        if refused:
            raise Refused(refused)
        eff = facts.get(SE.SPEC)
        refused = E.socket_mismatch(eff, facts.units.get(SOCKET))
        if refused:
            raise Refused(refused)
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
        old = self._old(facts)
        reasons += [f"remove {s.write.path} (provision's drop-in before it was named "
                    f"{a.path})" for s in old]
        for s in old:
            cfg = cfg.with_file(s.write.path, None)
        settings = E.hardened(self.content)
        changing = bool(reasons)
        found: list[E.Mismatch] = []
        if reasons:
            # what another file will still win once ours is in: apply will fail on it
            found = E.predict(settings, cfg, a.path, self.content, tuple(E.conns(eff).values()))
        elif eff.status not in (None, 0):
            reasons.append(f"sshd -T exits {eff.status}: {' / '.join(eff.error.splitlines()[:2])}")
        else:
            found = E.compare(settings, eff, cfg, a.path)
        verb = "will not take effect" if changing else "not in effect"
        reasons += [f"{verb}: {m.describe()}" for m in found]
        if eff.status in (None, 0):
            # Match blocks for connections `sshd -T -C` was not asked about (other users, other
            # addresses): read from the files, with ours in place
            named = {m.origin for m in found if m.origin is not None}
            reasons += [f"{verb}: {x.describe()}"
                        for x in E.loose(cfg.with_file(a.path, self.content), settings)
                        if x.origin not in named]
        if not reasons:
            return []
        # per user only where a Match block could tell users apart (ours has none)
        checks = ("",) if eff.uniform else ("", *(c.spec() for c in E.conns(eff).values()))
        # a commit-confirmed change: run by provision.hosts.confirm, not the plain batch
        changed = (fact.kind != "file" or fact.sha256 != sha256(want.content)
                   or (fact.mode, fact.owner, fact.group) != (a.mode, a.owner, a.group))
        return [CommitConfirmed("sshd", self.host.name, (Staged(want, "sshd", changed), *old),
                                a.service, reasons=tuple(reasons), checks=checks)]

    def _old(self, facts: Facts) -> tuple[Staged, ...]:
        """Our drop-in under its former names (by its heading): removed with this commit."""
        out = []
        for path in SSHD_DROPIN_BEFORE:
            f = facts.file(path)
            if f.kind == "file" and (f.content or "").startswith(MARK):
                out.append(Staged(WriteFile(path, "", old=f.content), "sshd-old", True,
                                  remove=True))
        return tuple(out)
