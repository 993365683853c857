"""The kernel baseline of a host (pure diff): sysctls, core dumps, unused modules, a clock
that keeps time. docs/hardening.md#the-kernel-baseline.

- Sysctls: `kernel_baseline.BASELINE` (plus IP forwarding off where Docker is not), with
  the inventory's `sysctl:` over it (roles, then the host; null drops a key), written to
  one file of ours in /etc/sysctl.d and set in the running kernel key by key, each read back
  by the batch (`SetSysctl`): the keys that differ, which is what `sysctl -p FILE` would
  write, with a check per key. Not `sysctl --system`: that rewrites every other file's keys
  too, undoing what someone set at run time outside our keys. What boot then does is
  checked instead: a file that systemd-sysctl applies after ours and sets one of our keys
  to another value is refused, naming the file and line. The cluster's port range is never
  ours (`provision.steps.cluster`).
- A key the running kernel runs otherwise is a change (drift after a `sysctl -w` by hand).
  A key no longer wanted: the value the other files give it is set again; with none, the
  kernel keeps what it runs until the next boot (the plan says so).
- In a container (systemd-nspawn, `systemd-detect-virt --container`) only the network
  namespace's keys are the container's own; the rest are the machine's kernel's, read-only
  there: left out, said once in the plan.
- Core dumps off (lynis KRNL-5820): `* hard core 0` for logins, `ulimit -c 0` for login
  shells, systemd-coredump keeping nothing; `kernel: {core_dumps: true}` leaves them on.
- Modules no GPU server needs (NETW-3200, USB-1000, STRG-1846) kept from loading;
  `kernel: {modules: [...]}` keeps some.
- Time: with no time daemon running, systemd-timesyncd is installed (when no other is) and
  started; in a container the clock is the machine's and nothing is done.
"""

from __future__ import annotations

from provision.facts import Facts, Request
from provision.facts.kernel import SPEC as KERNEL
from provision.facts.kernel import Kernel
from provision.facts.timesync import DAEMONS
from provision.facts.timesync import SPEC as TIMESYNC
from provision.frozen import frozen
from provision.inventory.model import Host, Inventory
from provision.render.env import render

from .actions import (
    Action,
    EnableUnit,
    InstallPackages,
    RemoveFile,
    SetSysctl,
    StartUnit,
    WriteFile,
)
from .files import diff_file
from .kernel_baseline import BASELINE, FORWARDING, GLOBAL_NET, MODULES, Setting
from .refused import Refused

SYSCTL_FILE = "/etc/sysctl.d/99-provision-baseline.conf"
LIMITS_FILE = "/etc/security/limits.d/90-provision-core.conf"
COREDUMP_FILE = "/etc/systemd/coredump.conf.d/90-provision.conf"
PROFILE_FILE = "/etc/profile.d/provision-core.sh"  # login shells (lynis KRNL-5820 reads it)
MODPROBE_FILE = "/etc/modprobe.d/provision-hardening.conf"
TIME_DAEMON = "systemd-timesyncd"  # Debian's and Ubuntu's own: no listening socket, no config
DOCKER_PACKAGES = frozenset({"docker.io", "docker-ce", "moby-engine"})


def docker_here(host: Host, facts: Facts) -> bool:
    """Docker is on the host, or the inventory installs it: its containers need forwarding."""
    names = {getattr(p, "name", p) for p in host.packages}
    return facts.docker or bool(names & DOCKER_PACKAGES)


def shared(key: str) -> bool:
    """The machine's kernel's setting, not a network namespace's (read-only in a container)."""
    return not key.startswith("net.") or key in GLOBAL_NET


def per_interface(key: str) -> bool:
    """A key of one interface (`net.ipv4.conf.eth0.rp_filter`): the fact reads only the
    all/default copies, so its value is unknown until the file holds it."""
    parts = key.split(".")
    return (len(parts) >= 5 and parts[0] == "net" and parts[2] in ("conf", "neigh")
            and parts[3] not in ("all", "default"))


def same(a: str | None, b: str) -> bool:
    return a is not None and " ".join(a.split()) == " ".join(b.split())


def wanted(host: Host, docker: bool) -> tuple[list[Setting], set[str]]:
    """The settings for `host` in order, and the keys the inventory set itself."""
    base = [*BASELINE, *(() if docker else FORWARDING)]
    out = {s.key: s for s in base}
    mine: set[str] = set()
    for key, value in host.sysctl:
        if value is None:
            out.pop(key, None)
        else:
            out[key] = Setting(key, value, f"the inventory's (hosts.{host.name} or its roles)")
            mine.add(key)
    return list(out.values()), mine


@frozen
class KernelStep:
    inv: Inventory
    host: Host
    name: str = "kernel"

    def request(self) -> Request:
        return Request(files=(SYSCTL_FILE, LIMITS_FILE, COREDUMP_FILE, PROFILE_FILE, MODPROBE_FILE),
                       packages=DAEMONS, facts=(KERNEL.name, TIMESYNC.name, "system"))

    def diff(self, facts: Facts) -> list[Action]:
        return [*self._sysctl(facts), *self._cores(facts), *self._modules(facts),
                *self._time(facts)]

    def notes(self, facts: Facts) -> list[str]:
        """What the step leaves out and why (a container's shared kernel, keys the kernel
        lacks, keys it keeps until reboot)."""
        k = facts.get(KERNEL)
        settings, _ = wanted(self.host, docker_here(self.host, facts))
        out: list[str] = []
        if k.in_container:
            keys = [s.key for s in settings if shared(s.key)]
            if keys:
                named = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
                out.append(f"kernel: {len(keys)} sysctl(s) ({named}) are the machine's kernel's, "
                           f"not settable in a container ({k.container}); set them on the machine")
            out.append(f"time: the clock is the machine's ({k.container} container): no time "
                       "daemon here")
        missing = [s.key for s in settings if self._missing(k, s.key)]
        if missing:
            out.append(f"kernel: {', '.join(missing)}: not in this kernel, left out")
        out += [f"kernel: {key} is no longer set by provision; the kernel keeps {value} until "
                "the next boot" for key, value in self._released(k, settings)]
        return out

    # --- sysctls -----------------------------------------------------------------------
    def _missing(self, k: Kernel, key: str) -> bool:
        return not (k.in_container and shared(key)) and key not in k.values \
            and not per_interface(key)

    def _kept(self, facts: Facts) -> list[Setting]:
        k = facts.get(KERNEL)
        settings, mine = wanted(self.host, docker_here(self.host, facts))
        kept: list[Setting] = []
        for s in settings:
            if k.in_container and shared(s.key):
                continue
            if self._missing(k, s.key):
                if s.key in mine:
                    raise Refused(f"kernel: sysctl {s.key} (hosts.{self.host.name}.sysctl or its "
                                  "roles'): this host's kernel has no such setting")
                continue
            for line in k.after(SYSCTL_FILE, s.key):
                if not same(line.value, s.value):
                    raise Refused(f"kernel: {line.where()} sets {line.name} = {line.value}, and "
                                  f"it is applied after {SYSCTL_FILE} at boot (sysctl.d(5) order), "
                                  f"overriding {s.value}; remove it there, or set the value in the "
                                  "inventory's `sysctl:`")
            kept.append(s)
        return kept

    def _released(self, k: Kernel, settings: list[Setting]) -> list[tuple[str, str]]:
        """Keys our file sets that are no longer wanted, which no other file sets: (key,
        the value the kernel runs)."""
        keys = {s.key for s in settings}
        out = []
        for line in k.file_lines(SYSCTL_FILE):
            if line.name not in keys and k.boot_value(line.name, without=SYSCTL_FILE) is None \
                    and line.name in k.values:
                out.append((line.name, k.values[line.name]))
        return out

    def _sysctl(self, facts: Facts) -> list[Action]:
        k = facts.get(KERNEL)
        kept = self._kept(facts)
        fact = facts.file(SYSCTL_FILE)
        out: list[Action] = []
        if kept:
            content = render("sysctl-baseline.conf.j2", host=self.host.name, settings=kept)
            out += diff_file(fact, WriteFile(SYSCTL_FILE, content))
        elif fact.exists:
            out.append(RemoveFile(SYSCTL_FILE, old=fact.content))
        for s in kept:
            live = k.values.get(s.key)
            if not same(live, s.value):
                why = "unknown in the kernel" if live is None else f"the kernel runs {live}"
                out.append(SetSysctl(s.key, " ".join(s.value.split()), why, SYSCTL_FILE))
        keys = {s.key for s in kept}
        for line in k.file_lines(SYSCTL_FILE):  # no longer ours: the other files' value again
            boot = k.boot_value(line.name, without=SYSCTL_FILE)
            if line.name in keys or boot is None or "*" in boot.name:
                continue
            if not same(k.values.get(line.name), boot.value):
                out.append(SetSysctl(line.name, " ".join(boot.value.split()),
                                     f"no longer provision's: {boot.where()} says so", boot.path))
        return out

    # --- core dumps, modules --------------------------------------------------------------
    def _cores(self, facts: Facts) -> list[Action]:
        files = {LIMITS_FILE: "limits-core.conf.j2", COREDUMP_FILE: "coredump.conf.j2",
                 PROFILE_FILE: "profile-core.sh.j2"}
        out: list[Action] = []
        for path, template in files.items():
            fact = facts.file(path)
            if self.host.core_dumps:
                if fact.exists:
                    out.append(RemoveFile(path, old=fact.content))
            else:
                out += diff_file(fact, WriteFile(path, render(template, host=self.host.name)))
        return out

    def _modules(self, facts: Facts) -> list[Action]:
        keep = set(self.host.kernel_modules)
        modules = [(n, why) for n, why in MODULES if n not in keep]
        fact = facts.file(MODPROBE_FILE)
        if not modules:
            return [RemoveFile(MODPROBE_FILE, old=fact.content)] if fact.exists else []
        return diff_file(fact, WriteFile(MODPROBE_FILE, render(
            "modprobe-hardening.conf.j2", host=self.host.name, modules=modules)))

    # --- time ------------------------------------------------------------------------------
    def _time(self, facts: Facts) -> list[Action]:
        t = facts.get(TIMESYNC)
        if not t.probed or t.in_container or t.active:
            return []
        installed = [d for d in DAEMONS if (p := facts.packages.get(d)) and p.installed]
        daemon = installed[0] if installed else TIME_DAEMON
        unit = "chrony.service" if daemon == "chrony" else f"{daemon}.service"
        return [*([] if installed else [InstallPackages((TIME_DAEMON,))]),
                EnableUnit(unit), StartUnit(unit)]

    @classmethod
    def build(cls, inv: Inventory, host: Host) -> KernelStep:
        return cls(inv, host)
