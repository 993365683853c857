"""Fact: Debian packages (`P:` arguments), from `dpkg-query`. Pure parser."""

from __future__ import annotations

from collections.abc import Sequence

from provision.frozen import frozen

from .spec import FactSpec, Rec


@frozen
class PackageFact:
    name: str
    status: str
    version: str

    @property
    def installed(self) -> bool:
        return self.status.endswith(" installed") and not self.status.startswith("deinstall")


def parse(records: Sequence[Rec]) -> dict[str, PackageFact]:
    return {r.fields[0]: PackageFact(r.fields[0], r.fields[1], r.fields[2])
            for r in records if len(r.fields) >= 3}


SPEC = FactSpec("packages", ("pkg",), parse)
