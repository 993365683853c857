"""Fact: the live filter table of both families as `iptables-save` text. Pure parser: it
only regroups the lines; `provision.firewall.parse` reads them into rules."""

from __future__ import annotations

from collections.abc import Sequence

from provision.frozen import frozen

from .spec import FactSpec, Rec, number


@frozen
class IptablesSave:
    v4: str = ""
    v6: str = ""
    status4: int | None = None  # exit status of iptables-save (127: not installed); None: not probed
    status6: int | None = None

    def text(self, family: int) -> str:
        return self.v4 if family == 4 else self.v6

    def status(self, family: int) -> int | None:
        return self.status4 if family == 4 else self.status6


def parse(records: Sequence[Rec]) -> IptablesSave:
    lines: dict[str, list[str]] = {"ipt4": [], "ipt6": []}
    status: dict[str, int] = {}
    for r in records:
        if r.kind in lines:
            lines[r.kind].append(r.raw)
        elif r.kind == "iptrc" and len(r.fields) == 2 and number(r.fields[1].lstrip("-"), 255) is not None:
            status[r.fields[0]] = int(r.fields[1])
    return IptablesSave("\n".join(lines["ipt4"]), "\n".join(lines["ipt6"]),
                        status.get("4"), status.get("6"))


SPEC = FactSpec("iptables", ("ipt4", "ipt6", "iptrc"), parse)
