"""Fact: whether each Jupyter server answers without a token (asked on the host itself:
GET /api/status, 200 = open to whoever reaches it, 403 = wants a token or password). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .listeners import split_endpoint
from .spec import FactSpec, Rec, number


@dataclass(frozen=True)
class JupyterAnswer:
    address: str
    port: int
    pid: int | None
    status: int  # HTTP status; 0 when it did not answer

    @property
    def open(self) -> bool:
        return self.status == 200


def parse(records: Sequence[Rec]) -> tuple[JupyterAnswer, ...]:
    out = []
    for r in records:
        if len(r.fields) != 3:
            continue
        ep = split_endpoint(r.fields[0])
        if ep is None:
            continue
        pid, code = r.fields[1], r.fields[2]
        out.append(JupyterAnswer(ep[0], ep[1], number(pid), number(code, 999) or 0))
    return tuple(out)


SPEC = FactSpec("jupyter_auth", ("jupyter",), parse)
