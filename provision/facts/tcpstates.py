"""Fact: TCP sockets counted by state (`ss -tanH`, counted on the host) and the CLOSE_WAIT
sockets with their process (`ss -tanpH state close-wait`). Pure parser."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import field

from provision.frozen import frozen

from .listeners import process_of
from .spec import FactSpec, Rec, as_int


@frozen
class TcpStates:
    counts: dict[str, int] = field(default_factory=dict)  # ss state name -> sockets
    # (process, pid) -> CLOSE_WAIT sockets it holds; ("", None) for sockets no process holds
    close_wait: dict[tuple[str, int | None], int] = field(default_factory=dict)

    def count(self, state: str) -> int:
        return self.counts.get(state, 0)


def parse(records: Sequence[Rec]) -> TcpStates:
    counts: dict[str, int] = {}
    by_proc: Counter[tuple[str, int | None]] = Counter()
    for r in records:
        if r.kind == "tcpstate" and len(r.fields) == 2:
            counts[r.fields[0]] = counts.get(r.fields[0], 0) + as_int(r.fields[1], r, "count")
        elif r.kind == "closewait":
            # with a state filter ss leaves the State column out: Recv-Q Send-Q local peer users
            by_proc[process_of(r.raw.split())] += 1
    return TcpStates(counts, dict(by_proc))


SPEC = FactSpec("tcpstates", ("tcpstate", "closewait"), parse)
