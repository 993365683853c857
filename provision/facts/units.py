"""Fact: systemd units (`S:` arguments), from `systemctl show`. Pure parser."""

from __future__ import annotations

from collections.abc import Sequence

from provision.frozen import frozen

from .spec import FactSpec, Rec, number


@frozen
class UnitFact:
    name: str
    load_state: str
    unit_file_state: str
    active_state: str
    need_daemon_reload: bool
    active_since: int | None  # unix seconds, when systemd can say
    listen: tuple[str, ...] = ()  # a socket unit's Listen= entries, e.g. "[::]:22 (Stream)"
    sub_state: str = ""  # `auto-restart`: it failed and systemd will try again

    @property
    def enabled(self) -> bool:
        return self.unit_file_state in ("enabled", "enabled-runtime", "static", "alias")

    @property
    def active(self) -> bool:
        """Running or on its way; a unit waiting to be restarted after a failure is not (it
        is `activating` to systemd, and fails again and again when its port is taken)."""
        return (self.active_state in ("active", "activating", "reloading")
                and self.sub_state != "auto-restart")


def parse(records: Sequence[Rec]) -> dict[str, UnitFact]:
    out: dict[str, UnitFact] = {}
    block: dict[str, str] = {}
    listen: list[str] = []
    for line in [*(r.raw for r in records), ""]:
        if line:
            k, _, v = line.partition("=")
            if k == "Listen":  # repeats, one per socket
                if v.strip():
                    listen.append(v.strip())
                continue
            block[k] = v
            continue
        if "Id" in block:
            since = block.get("ActiveEnterTimestamp", "")
            out[block["Id"]] = UnitFact(
                block["Id"], block.get("LoadState", ""), block.get("UnitFileState", ""),
                block.get("ActiveState", ""), block.get("NeedDaemonReload") == "yes",
                number(since[1:]) if since.startswith("@") else None,
                tuple(listen), block.get("SubState", ""))
        block, listen = {}, []
    return out


SPEC = FactSpec("units", ("unit",), parse)
