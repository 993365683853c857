"""Packages from the inventory (`host.packages`, apt) and the apt sources they come from
(`host.apt_sources`). Pure.

What a run does, from the facts:

* our sources (`/etc/apt/sources.list.d/provision-NAME.sources` + its key under
  `/etc/apt/keyrings/`) are written when they differ and removed when no longer declared;
  any such change is one `AptSources` action: keys checked on the host first, then
  `apt-get update`, everything put back when that fails;
* the package lists are refreshed (`AptUpdate`) only when something is to be installed and
  the lists are missing, older than `MAX_LIST_AGE`, or a missing package has no candidate:
  a converged host never runs `apt-get update`;
* the missing packages are installed (`InstallPackages`), after waiting for the dpkg lock;
* pinned versions and holds (`provision.steps.apt_pins`): pin files first, the pinned
  packages installed at their pins after the others, then the holds.
"""

from __future__ import annotations

from provision.facts import Facts, Request
from provision.facts import apt as A
from provision.frozen import frozen
from provision.inventory.apt import KEYRINGS_DIR, PREFIX, SOURCES_DIR, key_path, source_path
from provision.inventory.model import Host, Inventory
from provision.render.apt import apt_artifacts

from . import apt_pins
from .actions import Action, AptKey, AptSources, AptUpdate, InstallPackages, RemoveFile, WriteFile
from .apt_pins_actions import InstallPinned
from .files import sha256
from .refused import Refused

MAX_LIST_AGE = 24 * 3600  # lists older than this are refreshed before an install
GPG_PACKAGES = ("gpg", "gnupg")  # either brings /usr/bin/gpg, which the key check needs


def _age(seconds: int) -> str:
    return f"{seconds / 3600:.0f} h" if seconds >= 3600 else f"{seconds // 60} min"


@frozen
class PackagesStep:
    inv: Inventory
    host: Host
    name: str = "packages"

    def request(self) -> Request:
        files = tuple(p for s in self.host.apt_sources for p in (source_path(s.name), key_path(s.name)))
        return Request(files=files, prefixes=(f"{SOURCES_DIR}/{PREFIX}", f"{KEYRINGS_DIR}/{PREFIX}"),
                       packages=self.host.packages, facts=("apt",)).merge(apt_pins.request(self.host))

    def _sources(self, facts: Facts) -> AptSources | None:
        writes: list[WriteFile] = []
        keys: list[AptKey] = []
        uris: list[str] = []
        files = apt_artifacts(self.host)  # per source: its key, then its .sources file
        for s, key, src in zip(self.host.apt_sources, files[::2], files[1::2], strict=True):
            want = [WriteFile(a.path, a.content, a.mode, a.owner, a.group) for a in (key, src)]
            if any(self._differs(facts, w) for w in want):
                # the .sources file carries the fingerprint: a new pin re-checks the key
                writes += [self._with_old(facts, w) for w in want]
                keys.append(AptKey(s.name, key_path(s.name), s.fingerprint))
                uris.append(s.uri.rstrip("/"))
        wanted = {p for s in self.host.apt_sources for p in (source_path(s.name), key_path(s.name))}
        stale = [f for pre in (f"{SOURCES_DIR}/{PREFIX}", f"{KEYRINGS_DIR}/{PREFIX}")
                 for f in facts.prefixed(pre)
                 if f.path not in wanted and "/" not in f.path[len(pre):]
                 and f.path.endswith((".sources", ".asc"))]
        removes = tuple(RemoveFile(f.path, old=f.content) for f in stale)
        if not writes and not removes:
            return None
        return AptSources(tuple(writes), tuple(keys), removes, tuple(uris), self.inv.apt_lock_timeout)

    @staticmethod
    def _differs(facts: Facts, want: WriteFile) -> bool:
        f = facts.file(want.path)
        return (f.kind != "file" or f.sha256 != sha256(want.content)
                or (f.mode, f.owner, f.group) != (want.mode, want.owner, want.group))

    @staticmethod
    def _with_old(facts: Facts, want: WriteFile) -> WriteFile:
        f = facts.file(want.path)
        old = (f.content if f.content is not None else "") if f.kind == "file" else None
        return WriteFile(want.path, want.content, want.mode, want.owner, want.group, old=old)

    def refresh_reason(self, facts: Facts, missing: tuple[str, ...]) -> str | None:
        """Why the lists must be refreshed before installing `missing` (None: they are fine)."""
        apt = facts.get(A.SPEC)
        if apt.lists == 0:
            return "no package lists"
        if apt.age is None:
            return "package lists never refreshed by provision"
        if apt.age > MAX_LIST_AGE:
            return f"package lists are {_age(apt.age)} old"
        none = [p for p in missing if apt.candidate(p) is None]
        if none:
            return f"no candidate for {', '.join(none)}"
        return None

    def install(self, facts: Facts, names: tuple[str, ...]) -> list[Action]:
        """Install `names`, refreshing the lists first when `refresh_reason` says so."""
        why = self.refresh_reason(facts, names)
        return [*([AptUpdate(why, self.inv.apt_lock_timeout)] if why else []),
                InstallPackages(names, self.inv.apt_lock_timeout)]

    def diff(self, facts: Facts) -> list[Action]:
        pin_writes, changed = apt_pins.pin_files(self.host, facts)
        pinned = apt_pins.to_install(self.host, facts, changed)
        at_pin = {n for n, _ in pinned}
        missing = tuple(p for p in self.host.packages if p not in at_pin
                        and not (p in facts.packages and facts.packages[p].installed))
        sources = self._sources(facts)
        actions: list[Action] = list(pin_writes)
        if sources is not None and sources.keys and not facts.get(A.SPEC).gpg:
            # a key is checked with gpg on the host: a bare image without it gets it first,
            # from the lists it has, when the inventory asks for it
            first = next((p for p in GPG_PACKAGES if p in missing), None)
            if first is None:
                raise Refused(f"apt source {sources.keys[0].source}: gpg is not installed on "
                              "the host, so its signing key cannot be checked against the "
                              "pinned fingerprint; add gpg to the host's packages (it is "
                              "then installed before any source)")
            actions += self.install(facts, (first,))
            missing = tuple(p for p in missing if p != first)
        if sources is not None:
            actions.append(sources)  # includes the update
            if missing:
                actions.append(InstallPackages(missing, self.inv.apt_lock_timeout))
        elif missing:
            actions += self.install(facts, missing)
        if pinned:
            refreshed = any(isinstance(a, AptUpdate | AptSources) for a in actions)
            why = None if refreshed else self.refresh_reason(facts, tuple(
                n for n in at_pin if not (n in facts.packages and facts.packages[n].installed)))
            actions += [*([AptUpdate(why, self.inv.apt_lock_timeout)] if why else []),
                        InstallPinned(pinned, self.inv.apt_lock_timeout)]
        return actions + apt_pins.holds(self.host, facts, at_pin)
