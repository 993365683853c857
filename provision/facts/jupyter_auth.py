"""Fact: whether each Jupyter server answers without a token (asked on the host itself:
GET /api/status, 200 = open to whoever reaches it, 403 = wants a token or password), and
the account it runs as. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from provision.record import record

from .listeners import split_endpoint
from .spec import FactSpec, Rec, number


@record
class JupyterAnswer:
    address: str
    port: int
    pid: int | None
    status: int  # HTTP status; 0 when it did not answer
    owner: str = ""  # the account the process runs as ("" when the host did not say)

    @property
    def open(self) -> bool:
        return self.status == 200


def parse(records: Sequence[Rec]) -> tuple[JupyterAnswer, ...]:
    out = []
    for r in records:
        if len(r.fields) not in (3, 4):
            continue
        ep = split_endpoint(r.fields[0])
        if ep is None:
            continue
        pid, code = r.fields[1], r.fields[2]
        owner = r.fields[3] if len(r.fields) == 4 and r.fields[3] != "?" else ""
        out.append(JupyterAnswer(ep[0], ep[1], number(pid), number(code, 999) or 0, owner))
    return tuple(out)


SPEC = FactSpec("jupyter_auth", ("jupyter",), parse)
