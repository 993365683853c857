"""Pinned and held packages, and the unattended-upgrades policy, as model records (pure).

`packages:` entries may be a plain name or `{name, version, hold}`; `updates:` sets the
security upgrades of a role or host. `apt_policy_doc` holds their YAML form; these are what
the steps read. Text here has been validated (`check_version`, `check_glob`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from provision.frozen import frozen
from provision.text import printable

# Debian's version characters (deb-version(7): epoch ':', upstream [A-Za-z0-9.+~-], revision
# '-'), plus apt_preferences' glob '*'. Nothing that could end a line or a field of the
# preferences file it is written into.
_VERSION = re.compile(r"^[0-9*][A-Za-z0-9.+~:*-]{0,127}$")
# A package name (Debian's characters) with '*' as the only wildcard.
_GLOB = re.compile(r"^[a-z0-9*][a-z0-9+.*-]{0,127}$")

# What unattended-upgrades must never replace on a GPU server by default, when any of it is
# installed or declared: the driver's user-space libraries, its kernel module packages and
# the CUDA libraries built against it. Replacing them while the old module stays loaded is
# "Failed to initialize NVML: Driver/library version mismatch" until a reboot
# (docs/updates.md). The fact fragment templates/facts/updates.sh lists the same globs
# (a unit test keeps the two equal).
GPU_PACKAGES = ("*nvidia*", "cuda-*", "libcuda*", "libcudnn*", "libnccl*", "libcublas*",
                "libcufft*", "libcurand*", "libcusolver*", "libcusparse*", "libnpp*",
                "libnvjpeg*", "libnvjitlink*", "libnvcuvid*", "libnvoptix*",
                "datacenter-gpu-manager*")


def check_version(value: str) -> str:
    if not _VERSION.match(value):
        raise ValueError(f"invalid version {printable(value)!r} (a Debian version: digits, "
                         "letters and . + ~ : -, starting with a digit, e.g. 12.4.1-1 or "
                         "1:2.3; '*' matches anything, e.g. 12.4.*)")
    return value


def check_glob(value: str) -> str:
    if not _GLOB.match(value) or value.strip("*") == "":
        raise ValueError(f"invalid package pattern {printable(value)!r} (a Debian package "
                         "name: lowercase letters, digits and + . -, with '*' for any run of "
                         "characters, e.g. nvidia-*; not '*' alone)")
    return value


def glob_matches(glob: str, name: str) -> bool:
    """Whether package `name` matches `glob` ('*' any run of characters, nothing else special)."""
    return re.fullmatch(".*".join(re.escape(p) for p in glob.split("*")), name) is not None


def blacklist_regex(glob: str) -> str:
    """`glob` as unattended-upgrades' Package-Blacklist wants it: a Python regular expression
    matched with re.match (anchored at the start only), so the end is anchored here and the
    name's own '.' and '+' are escaped (`libstdc++6` would otherwise mean 'libstdc' then
    one or more 'c')."""
    return ".*".join(p.replace(".", "\\.").replace("+", "\\+") for p in glob.split("*")) + "$"


@frozen
class PackagePin:
    """A package installed at `version` (a Debian version or glob; None: any) and/or held."""

    name: str
    version: str | None = None
    hold: bool = False


REBOOT_NEVER = "never"


@frozen
class Updates:
    """The host's unattended-upgrades policy. `never`: None is the GPU default (GPU_PACKAGES
    when such packages are on the host or declared for it)."""

    security: bool = True
    never: tuple[str, ...] | None = None
    reboot: str = REBOOT_NEVER  # or "HH:MM", the host's local time

    def blacklist(self, present: Iterable[str]) -> tuple[str, ...]:
        """The globs unattended-upgrades must leave alone, given the packages on the host
        and declared for it (`present`)."""
        if self.never is not None:
            return self.never
        names = list(present)
        if any(glob_matches(g, n) for g in GPU_PACKAGES for n in names):
            return GPU_PACKAGES
        return ()


def pin_file_name(package: str) -> str:
    """apt reads only preferences.d files named with letters, digits, '_', '-' and '.'
    (apt_preferences(5)), and a package name may hold '+': it becomes '_', which no
    package name holds, so two names never share a file."""
    return "provision-" + package.replace("+", "_") + ".pref"
