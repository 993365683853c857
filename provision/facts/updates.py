"""Fact: unattended-upgrades as apt really reads it, the GPU packages on the host, and a
pending reboot. Pure parser.

Records: `uuconf KEY VALUE` (one per `apt-config dump` line of the keys provision sets; a
list's items share the key `...::`), `uufile PATH` (a configuration file that mentions
them), `gpupkg NAME` (an installed package of the GPU set), `rebootreq EPOCH` (the mtime of
/var/run/reboot-required), `rebootpkg NAME` (its .pkgs list: packages' own text, kept only
when it is a package name), `uunow EPOCH` (the host's clock).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from provision.frozen import frozen

from .spec import FactsError, FactSpec, Rec, as_int

_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]{0,127}$")


@frozen
class UpdatesFact:
    config: tuple[tuple[str, str], ...] = ()  # (key, value) as apt-config dump prints them
    files: tuple[str, ...] = ()
    gpu_packages: tuple[str, ...] = ()
    reboot_since: int | None = None
    reboot_packages: tuple[str, ...] = ()
    now: int = 0


def parse(records: Sequence[Rec]) -> UpdatesFact:
    config: list[tuple[str, str]] = []
    files: list[str] = []
    gpu: list[str] = []
    since: int | None = None
    waiting: list[str] = []
    now = 0
    for r in records:
        f = r.fields
        if r.kind == "uuconf":
            if len(f) < 2:
                raise FactsError(f"line {r.line}: a uuconf record needs a key and a value")
            config.append((f[0], r.raw.split("\t", 1)[1]))
        elif r.kind == "uufile":
            files.append(r.raw)
        elif r.kind == "gpupkg" and _NAME.match(f[0]):
            gpu.append(f[0])
        elif r.kind == "rebootreq":
            since = as_int(f[0], r, "reboot-required time")
        elif r.kind == "rebootpkg" and _NAME.match(f[0]):
            waiting.append(f[0])
        elif r.kind == "uunow":
            now = as_int(f[0], r, "time")
    return UpdatesFact(tuple(config), tuple(files), tuple(gpu), since, tuple(waiting), now)


SPEC = FactSpec("updates", ("uuconf", "uufile", "gpupkg", "rebootreq", "rebootpkg", "uunow"), parse)
