"""Fact: sshd's effective configuration (`sshd -T`, lower-case keys). Pure parser."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .spec import FactSpec, Rec, number


@dataclass(frozen=True)
class SshdEffective:
    # key -> values (keys such as listenaddress or hostkey repeat); lower-case keys
    settings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    status: int | None = None  # exit status of sshd -T; None: not probed
    error: str = ""  # its output when it failed

    def get(self, key: str) -> str:
        """The (first) value of a setting, "" when absent."""
        values = self.settings.get(key.lower(), ())
        return values[0] if values else ""


def parse(records: Sequence[Rec]) -> SshdEffective:
    settings: dict[str, list[str]] = {}
    lines: list[str] = []
    status: int | None = None
    for r in records:
        if r.kind == "sshdt":
            lines.append(r.raw)
            key, _, value = r.raw.strip().partition(" ")
            if key:
                settings.setdefault(key.lower(), []).append(value.strip())
        elif r.kind == "sshdrc" and r.fields and number(r.fields[0].lstrip("-"), 255) is not None:
            status = int(r.fields[0])
    if status not in (None, 0):
        return SshdEffective({}, status, "\n".join(lines)[-500:])
    return SshdEffective({k: tuple(v) for k, v in settings.items()}, status)


SPEC = FactSpec("sshd_effective", ("sshdt", "sshdrc"), parse)
