"""The YAML of pinned/held packages and of `updates:`, and how roles and the host merge (pure).

A `packages:` entry is a name or `{name, version, hold}`. Entries merge in order (roles, then
the host): every name is installed; a mapping for a name replaces an earlier mapping for the
same name (the host's pin wins over its roles'); a plain name never removes a pin.
`updates:` merges field by field, the host's fields over its roles', later roles over earlier.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, StrictBool, Tag

from .apt_policy import REBOOT_NEVER, PackagePin, Updates, check_glob, check_version
from .fields import Package

Version = Annotated[str, AfterValidator(check_version)]
Glob = Annotated[str, AfterValidator(check_glob)]
RebootTime = Annotated[str, Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class PackagePinDoc(_Strict):
    name: Package
    version: Version | None = Field(
        None, description="a Debian version or a glob (12.4.*): installed at it (a downgrade "
                          "if need be) and kept there by an apt pin of priority 1001")
    hold: StrictBool = Field(
        False, description="apt-mark hold: apt upgrades and unattended-upgrades leave it alone")


def _entry_form(value: Any) -> str:
    return "Pin" if isinstance(value, dict) else "Name"


PackageEntry = Annotated[
    Annotated[Package, Tag("Name")] | Annotated[PackagePinDoc, Tag("Pin")],
    Discriminator(_entry_form)]


class UpdatesDoc(_Strict):
    pattern_words: ClassVar[Mapping[str, str]] = {"reboot": "never, or a time of day HH:MM (24 h, the host's time)"}

    security: StrictBool | None = Field(
        None, description="unattended security upgrades (default true)")
    never: list[Glob] | None = Field(
        None, description="package globs unattended-upgrades never touches (default: the "
                          "NVIDIA/CUDA set when such packages are on the host; [] for none)")
    reboot: Literal["never"] | RebootTime | None = Field(
        None, description="never (default: `audit` reports a pending reboot) or HH:MM, "
                          "when unattended-upgrades may reboot the host after an upgrade")


def entry_name(e: str | PackagePinDoc) -> str:
    return e if isinstance(e, str) else e.name


def merge_packages(entries: Iterable[str | PackagePinDoc]) -> tuple[tuple[str, ...],
                                                                    tuple[PackagePin, ...]]:
    """(every package name, in first-seen order; the pins, the last mapping per name wins)."""
    names: dict[str, None] = {}
    pins: dict[str, PackagePin] = {}
    for e in entries:
        names[entry_name(e)] = None
        if isinstance(e, PackagePinDoc):
            pins.pop(e.name, None)  # keeps the order of the winning mapping
            pins[e.name] = PackagePin(e.name, e.version, e.hold)
    return tuple(names), tuple(p for p in pins.values() if p.version is not None or p.hold)


def merge_updates(docs: Sequence[UpdatesDoc | None]) -> Updates:
    security, never, reboot = True, None, REBOOT_NEVER
    for d in docs:
        if d is None:
            continue
        security = d.security if d.security is not None else security
        never = tuple(d.never) if d.never is not None else never
        reboot = d.reboot if d.reboot is not None else reboot
    return Updates(security, never, reboot)

