"""Pinned versions and holds of the packages step (pure): facts -> actions.

- A pinned version is an apt preferences file of ours,
  `/etc/apt/preferences.d/provision-NAME.pref` (`Pin: version GLOB`, priority 1001, so the
  pinned version is the candidate even when it is older than the installed one); a file no
  longer declared is removed. The package is (re)installed at the pin when dpkg reports it
  missing or at a version the glob does not match (`InstallPinned`).
- A converged pin is read back with `apt-cache policy` (facts/apt_pins): apt's candidate
  must match the pin, else another preferences file outranks ours, or no such version is in
  the sources: refused, naming the candidate.
- Holds are `apt-mark hold`; the names provision held are recorded on the host
  (`/var/lib/provision/apt-holds`, root's, 0600), so a hold taken out of the inventory is
  lifted, and a hold somebody else set is never touched. A hold lifted by hand is drift:
  held again.
"""

from __future__ import annotations

import re

from provision.facts import Facts, Request
from provision.facts import apt_pins as AP
from provision.inventory.apt_policy import PackagePin, glob_matches, pin_file_name
from provision.inventory.model import Host
from provision.render.env import render

from .actions import Action, RemoveFile, WriteFile
from .apt_pins_actions import AptHolds
from .files import diff_file
from .refused import Refused

PREFS_DIR = "/etc/apt/preferences.d"
PREFIX = f"{PREFS_DIR}/provision-"
HOLDS = "/var/lib/provision/apt-holds"
_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]*$")


def pin_path(package: str) -> str:
    return f"{PREFS_DIR}/{pin_file_name(package)}"


def versioned(host: Host) -> tuple[PackagePin, ...]:
    return tuple(p for p in host.package_pins if p.version is not None)


def request(host: Host) -> Request:
    return Request(files=(HOLDS, *(pin_path(p.name) for p in versioned(host))),
                   prefixes=(PREFIX,), facts=(AP.SPEC.name,))


def pin_file(host: Host, pin: PackagePin) -> str:
    return render("apt-pin.pref.j2", host=host.name, name=pin.name, version=pin.version)


def holds_file(names: list[str]) -> str:
    return render("apt-holds.j2", names=names)


def pin_files(host: Host, facts: Facts) -> tuple[list[Action], set[str]]:
    """The pin files to write or remove, and the packages whose pin file changes."""
    out: list[Action] = []
    changed: set[str] = set()
    for p in versioned(host):
        writes = diff_file(facts.file(pin_path(p.name)), WriteFile(pin_path(p.name), pin_file(host, p)))
        out += writes
        if writes:
            changed.add(p.name)
    wanted = {pin_path(p.name) for p in versioned(host)}
    for f in facts.prefixed(PREFIX):
        if f.path not in wanted and "/" not in f.path[len(PREFIX):] and f.path.endswith(".pref"):
            out.append(RemoveFile(f.path, old=f.content))
    return out, changed


def to_install(host: Host, facts: Facts, changed: set[str]) -> tuple[tuple[str, str], ...]:
    """(name, glob) of the pinned packages not installed at a matching version. A converged
    pin whose candidate does not match is refused: reinstalling would not change it."""
    pins = facts.get(AP.SPEC)
    out = []
    for p in versioned(host):
        assert p.version is not None
        pkg = facts.packages.get(p.name)
        if pkg is None or not pkg.installed or not glob_matches(p.version, pkg.version):
            out.append((p.name, p.version))
            continue
        pol = pins.policies.get(p.name)
        if p.name in changed or pol is None:
            continue  # a new or rewritten pin: the batch checks the candidate first
        if pol.candidate is None or not glob_matches(p.version, pol.candidate):
            raise Refused(f"package {p.name}: apt's candidate is {pol.candidate or 'none'}, "
                          f"not a version matching the pin {p.version} (our "
                          f"{pin_path(p.name)} is there): another file in {PREFS_DIR} "
                          "outranks it; see `apt-cache policy " + p.name + "` on the host")
    return tuple(out)


def recorded(facts: Facts) -> list[str]:
    """The names in provision's record of its holds (root's file, checked line by line)."""
    f = facts.file(HOLDS)
    if f.kind != "file" or f.content is None:
        return []
    names = [ln for ln in f.content.splitlines() if ln and not ln.startswith("#")]
    bad = next((n for n in names if not _NAME.match(n)), None)
    if bad is not None or f.owner != "root":
        raise Refused(f"{HOLDS} (provision's record of the holds it set) is not root's list of "
                      "package names; remove it and run again (holds are then taken anew)")
    return names


def holds(host: Host, facts: Facts, reinstalled: set[str]) -> list[Action]:
    """Hold what is declared held and is not (or is `reinstalled`: apt-get install, even
    with --allow-change-held-packages, leaves the package selected `install`); lift the
    holds provision recorded and no longer wants."""
    want = sorted({p.name for p in host.package_pins if p.hold})
    record = recorded(facts)
    rec_state = facts.get(AP.SPEC).recorded

    def held(name: str) -> bool:
        pkg = facts.packages.get(name)
        return pkg.status.startswith("hold ") if pkg is not None else rec_state.get(name, False)

    hold = tuple(n for n in want if n in reinstalled or not held(n))
    unhold = tuple(n for n in record if n not in want and held(n))
    out: list[Action] = [AptHolds(hold, unhold)] if hold or unhold else []
    if record != want or (want and facts.file(HOLDS).mode != 0o600):
        if want:
            old = facts.file(HOLDS)
            out.append(WriteFile(HOLDS, holds_file(want), 0o600,
                                 old=(old.content or "") if old.kind == "file" else None))
        else:
            out.append(RemoveFile(HOLDS, old=facts.file(HOLDS).content))
    return out
