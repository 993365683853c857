"""`sysctl:` and `kernel:` of a host or role as pydantic types (what the YAML may say), and
their merge (roles in order, then the host). The baseline they override is
`provision.steps.kernel_baseline`; docs/hardening.md#the-kernel-baseline."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from provision.text import printable

# `net.ipv4.conf.all.rp_filter`, `kernel.yama.ptrace_scope`, `net.ipv4.conf.eth0/100.rp_filter`
# (sysctl writes a dot inside an interface name as `/`): what /proc/sys holds, nothing a
# shell or a sysctl.d parser reads otherwise (no globs, no `-` prefix, no spaces)
_KEY = re.compile(r"^[a-z][a-z0-9_]*(\.[A-Za-z0-9_@:+-]+(/[A-Za-z0-9_@:+-]+)*)+$")
_VALUE = re.compile(r"^[A-Za-z0-9_.:,/+@=-]+( [A-Za-z0-9_.:,/+@=-]+)*$")
PORT_RANGE = "net.ipv4.ip_local_port_range"  # the cluster step's (provision.steps.cluster)
# modules the baseline keeps from loading, and what `kernel.modules` may name
MODULE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


def check_sysctl_key(key: str) -> str:
    if len(key) > 128 or not _KEY.match(key):
        raise ValueError(f"{printable(key)!r} is not a sysctl name (dotted lower-case words as "
                         "`sysctl -a` prints them, e.g. net.ipv4.conf.all.rp_filter; no globs, "
                         "spaces or '-' prefix)")
    if key == PORT_RANGE:
        raise ValueError(f"{key} is the training cluster's (set `ephemeral_ports` on the host "
                         "or the cluster's range instead)")
    return key


def check_sysctl_value(value: str | int) -> str:
    """A value as `sysctl -n` prints it: words of plain characters separated by one space."""
    text = str(value)
    if len(text) > 256 or not _VALUE.match(text):
        raise ValueError(f"{printable(text)!r} is not a plain sysctl value (letters, digits and "
                         "_.:,/+@=- in words separated by single spaces, no newline, at most "
                         "256 characters); null drops a baseline key")
    return text


def check_module(name: str) -> str:
    if not MODULE.match(name):
        raise ValueError(f"{printable(name)!r} is not a kernel module name (lower-case letters, "
                         "digits, '_' and '-')")
    return name


SysctlKey = Annotated[StrictStr, AfterValidator(check_sysctl_key)]
SysctlValue = Annotated[StrictStr | StrictInt, AfterValidator(check_sysctl_value)]
Sysctl = dict[SysctlKey, SysctlValue | None]
Module = Annotated[StrictStr, AfterValidator(check_module)]

SYSCTL_DESCRIPTION = ("kernel settings over the baseline (docs/hardening.md#the-kernel-baseline): "
                      "name -> value; null drops a baseline key (merged: roles in order, then "
                      "the host)")


class KernelDoc(BaseModel):
    """What the kernel step keeps from the baseline beside sysctls."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    core_dumps: StrictBool | None = Field(
        None, description="true: leave core dumps on (no `* hard core 0`, no systemd-coredump "
                          "drop-in), e.g. for a team debugging CUDA crashes; default off")
    modules: list[Module] | None = Field(
        None, description="modules the baseline would keep from loading that this host needs "
                          "(e.g. usb-storage for a BMC's virtual media, sctp)")


def merged_sysctl(layers: Iterable[Mapping[str, str | None]]) -> tuple[tuple[str, str | None], ...]:
    """Roles in order, then the host: a later layer's key wins (None: drop the baseline's)."""
    out: dict[str, str | None] = {}
    for layer in layers:
        out.update(layer)
    return tuple(out.items())


def merged_kernel(layers: Iterable[KernelDoc | None]) -> tuple[bool, tuple[str, ...]]:
    """(core dumps on, modules allowed): a later layer's `core_dumps` wins; modules add up."""
    cores, modules = False, dict[str, None]()
    for k in layers:
        if k is None:
            continue
        if k.core_dumps is not None:
            cores = k.core_dumps
        modules.update(dict.fromkeys(k.modules or ()))
    return cores, tuple(modules)
