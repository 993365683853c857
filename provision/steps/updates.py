"""Security updates by policy (`updates:`; pure diff), applied with Debian's
unattended-upgrades (docs/updates.md).

- One file of ours, /etc/apt/apt.conf.d/99provision-updates, read after Debian's
  20auto-upgrades and 50unattended-upgrades (apt reads the directory in name order and the
  last value of a key wins): it clears and sets the origins (the security archives only),
  the packages never to touch (`Package-Blacklist`: the NVIDIA/CUDA set by default when
  such packages are on the host or declared for it), and the reboot policy.
- unattended-upgrades is installed when security upgrades are on and it is missing.
- The effect is read back: `apt-config dump` (facts/updates) must show our values; on a
  converged host a file read after ours that changes them is refused, naming the files;
  after a write the batch reads it back (`CheckAptConfig`).
"""

from __future__ import annotations

from provision.facts import Facts, Request
from provision.facts import updates as U
from provision.frozen import frozen
from provision.inventory.apt_policy import REBOOT_NEVER, blacklist_regex
from provision.inventory.model import Host, Inventory
from provision.render.env import render

from .actions import Action, WriteFile
from .apt_config_check import CheckAptConfig
from .files import diff_file
from .packages import PackagesStep
from .refused import Refused

CONF = "/etc/apt/apt.conf.d/99provision-updates"
PACKAGE = "unattended-upgrades"
# The security archives of Debian (bookworm-security; before bullseye, codename/updates)
# and Ubuntu (jammy-security); ${distro_codename} is unattended-upgrades' own substitution.
ORIGINS = ("origin=Debian,codename=${distro_codename}-security,label=Debian-Security",
           "origin=Debian,codename=${distro_codename},label=Debian-Security",
           "origin=Ubuntu,archive=${distro_codename}-security,label=Ubuntu")


def keys(security: bool) -> str:
    """The dumped lines of the keys our file sets (Update-Package-Lists only with security
    upgrades on: off, the lists' refresh is left as the host has it)."""
    periodic = "Unattended-Upgrade|Update-Package-Lists" if security else "Unattended-Upgrade"
    return (f'^(APT::Periodic::({periodic})|Unattended-Upgrade::(Automatic-Reboot|'
            'Automatic-Reboot-Time|Origins-Pattern::|Allowed-Origins::|Package-Blacklist::)) "')


@frozen
class UpdatesStep:
    inv: Inventory
    host: Host
    name: str = "updates"

    def request(self) -> Request:
        return Request(files=(CONF,), packages=(PACKAGE, *self.host.packages),
                       facts=(U.SPEC.name, "apt"))

    def never(self, facts: Facts) -> tuple[str, ...]:
        return self.host.updates.blacklist((*facts.get(U.SPEC).gpu_packages, *self.host.packages))

    def expected(self, never: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
        """(key, value) as `apt-config dump` prints them once our file is read last."""
        u = self.host.updates
        out = [("APT::Periodic::Unattended-Upgrade", "1" if u.security else "0")]
        if u.security:
            out.append(("APT::Periodic::Update-Package-Lists", "1"))
        out += [("Unattended-Upgrade::Origins-Pattern::", o) for o in ORIGINS]
        out += [("Unattended-Upgrade::Package-Blacklist::", blacklist_regex(g)) for g in never]
        out.append(("Unattended-Upgrade::Automatic-Reboot", "false" if u.reboot == REBOOT_NEVER else "true"))
        if u.reboot != REBOOT_NEVER:
            out.append(("Unattended-Upgrade::Automatic-Reboot-Time", u.reboot))
        return tuple(out)

    def content(self, never: tuple[str, ...]) -> str:
        u = self.host.updates
        return render("apt-updates.conf.j2", host=self.host.name, security=u.security,
                      origins=ORIGINS, never=never, blacklist=[blacklist_regex(g) for g in never],
                      reboot=u.reboot)

    def diff(self, facts: Facts) -> list[Action]:
        never = self.never(facts)
        want = self.expected(never)
        out: list[Action] = []
        pkg = facts.packages.get(PACKAGE)
        if self.host.updates.security and not (pkg and pkg.installed):
            out += PackagesStep(self.inv, self.host).install(facts, (PACKAGE,))
        writes = diff_file(facts.file(CONF), WriteFile(CONF, self.content(never)))
        fact = facts.get(U.SPEC)
        # the Update-Package-Lists of a host with security off is not ours to check
        live = tuple(kv for kv in fact.config
                     if self.host.updates.security or kv[0] != "APT::Periodic::Update-Package-Lists")
        if not writes and sorted(live) != sorted(want):
            raise Refused(_overridden(live, want, [f for f in fact.files if f != CONF]))
        if writes:
            out += [*writes, CheckAptConfig(CONF, keys(self.host.updates.security), tuple(f'{k} "{v}";' for k, v in want))]
        return out

    @classmethod
    def build(cls, inv: Inventory, host: Host) -> UpdatesStep:
        return cls(inv, host)


def _overridden(live: tuple[tuple[str, str], ...], want: tuple[tuple[str, str], ...],
                theirs: list[str]) -> str:
    """Which key apt reads otherwise than our file sets, and who else sets these keys."""
    got: dict[str, list[str]] = {}
    exp: dict[str, list[str]] = {}
    for table, pairs in ((got, live), (exp, want)):
        for k, v in pairs:
            table.setdefault(k, []).append(v)
    key = next(k for k in sorted({*got, *exp}) if sorted(got.get(k, [])) != sorted(exp.get(k, [])))
    return (f"apt applies {key} = {', '.join(got.get(key, [])) or 'nothing'}, not "
            f"{', '.join(exp.get(key, [])) or 'nothing'} as {CONF} sets it: a file read after "
            f"ours or /etc/apt/apt.conf wins (files that set these keys: "
            f"{', '.join(theirs) or 'none found'}); move that setting into the inventory's updates:")
