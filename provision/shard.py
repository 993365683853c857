"""Shards of a fleet and merged recaps, for running one converge from N CI runners (pure).

`--shard K/N` keeps the hosts whose stable hash lands in slice K of N: SHA-256 of the host
name (not Python's per-process `hash`), so every runner, every run, every Python computes
the same split, and adding a host moves no other host. Bastions are global, never sharded:
they carry every shard's connections and confirmations, so they are converged once, first,
by a run of their own (`provision apply bastions`), and a shard leaves them out. Security
groups and DNS are global as well (`provision sg apply`, `provision dns apply`, once).

`merge` joins the `--json` recaps of the shards (and of the bastion run) into one report.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from provision.errors import UsageError
from provision.frozen import frozen

T = TypeVar("T")


@frozen
class Shard:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, name: str) -> bool:
        return shard_of(name, self.count) == self.index


def parse_shard(text: str) -> Shard:
    """`K/N` with 1 <= K <= N (UsageError otherwise)."""
    k, sep, n = text.partition("/")
    # isascii: str.isdigit() accepts '²', which int() refuses, and int() reads other
    # scripts' digits; K/N is written with 0-9
    if not (sep and k.isascii() and n.isascii() and k.isdigit() and n.isdigit()) \
            or not 1 <= int(k) <= int(n):
        raise UsageError(f"--shard {text!r}: expected K/N with 1 <= K <= N (e.g. 2/8)")
    return Shard(int(k), int(n))


def shard_of(name: str, count: int) -> int:
    """The 1-based shard of host `name` among `count`."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def split(hosts: Sequence[T], shard: Shard, name: Callable[[T], str],
          is_bastion: Callable[[T], bool]) -> tuple[list[T], list[T]]:
    """(the shard's hosts, the bastions it leaves to the global run), in the given order."""
    mine = [h for h in hosts if not is_bastion(h) and shard.holds(name(h))]
    return mine, [h for h in hosts if is_bastion(h)]


BAD = ("failed", "unreachable")


def merge(reports: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One report from several `plan/apply --json` outputs, given as (source label, data).

    Hosts and plan sections are concatenated in the order given; the summary is recounted
    from the hosts. A host reported twice, or reports of different commands or playbooks,
    are refused (UsageError): they are not shards of one run.
    """
    hosts: list[dict[str, Any]] = []
    sections: list[Any] = []
    plan_summary: dict[str, int] = {}
    seen: dict[str, str] = {}
    sources: list[dict[str, Any]] = []
    kinds: set[tuple[str, str]] = set()
    for label, data in reports:
        if not isinstance(data, dict) or not isinstance(data.get("hosts"), list):
            raise UsageError(f"{label}: not a provision plan/apply --json report")
        kinds.add((str(data.get("command")), str(data.get("playbook"))))
        if len(kinds) > 1:
            raise UsageError(f"{label}: reports of different runs "
                             f"({', '.join(sorted(f'{c} {p}' for c, p in kinds))})")
        for h in data["hosts"]:
            name = str(h.get("host"))
            if name in seen:
                raise UsageError(f"{label}: host {name} is also in {seen[name]}: "
                                 "overlapping shards")
            seen[name] = label
            hosts.append(h)
        plan = data.get("plan") or {}
        sections += plan.get("sections") or []
        for key, value in (plan.get("summary") or {}).items():
            if isinstance(value, int):
                plan_summary[key] = plan_summary.get(key, 0) + value
        sources.append({"source": label, "shard": data.get("shard"),
                        "hosts": len(data["hosts"]), "control": data.get("control")})
    if not sources:
        raise UsageError("nothing to merge: give the --json reports of the shards")
    summary: dict[str, int] = {}
    for h in hosts:
        summary[str(h.get("status"))] = summary.get(str(h.get("status")), 0) + 1
    command, playbook = next(iter(kinds))
    return {"command": command, "playbook": playbook, "summary": summary,
            "plan": {"summary": plan_summary, "sections": sections},
            "hosts": hosts, "merged": sources,
            "failed": sorted(str(h.get("host")) for h in hosts if h.get("status") in BAD)}
