"""Fact: whether each Jupyter server answers without a token (asked on the host itself:
GET /api/status, 200 = open to whoever reaches it, 403 = wants a token or password), and
the account it runs as. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from provision.frozen import frozen

from .listeners import split_endpoint
from .spec import FactSpec, Rec, number


@frozen
class JupyterAnswer:
    address: str
    port: int
    pid: int | None
    status: int  # HTTP status; 0 when it did not answer
    owner: str = ""  # the account the process runs as ("" when the host did not say)

    @property
    def open(self) -> bool:
        return self.status == 200


@frozen
class SocketAnswer:
    """A member's own server on its Unix socket, asked as the member: `absent` (nothing
    there), `foreign` (a socket not theirs), `nouser`, or the HTTP status of /api/status
    (0: no answer)."""

    member: str
    state: str

    @property
    def status(self) -> int:
        return int(self.state) if self.state.isdigit() else 0


@frozen
class PortHolder:
    """A process listening on a member's own port (their server, or an account in its place)."""

    member: str
    port: int
    pid: int
    owner: str


@frozen
class JupyterAuth:
    answers: tuple[JupyterAnswer, ...] = ()
    sockets: dict[str, SocketAnswer] = field(default_factory=dict)
    holders: tuple[PortHolder, ...] = ()


def parse(records: Sequence[Rec]) -> JupyterAuth:
    out = []
    sockets: dict[str, SocketAnswer] = {}
    holders: list[PortHolder] = []
    for r in records:
        if r.kind == "jport":
            if len(r.fields) == 4 and (hport := number(r.fields[1], 65535)) and (
                    hpid := number(r.fields[2])) is not None:
                holders.append(PortHolder(r.fields[0], hport, hpid, r.fields[3]))
            continue
        if r.kind == "jsock":
            if len(r.fields) == 2 and (r.fields[1] in ("absent", "foreign", "nouser")
                                       or (r.fields[1].isascii() and r.fields[1].isdigit()
                                           and len(r.fields[1]) == 3)):
                sockets[r.fields[0]] = SocketAnswer(r.fields[0], r.fields[1])
            continue
        if len(r.fields) not in (3, 4):
            continue
        ep = split_endpoint(r.fields[0])
        if ep is None:
            continue
        pid, code = r.fields[1], r.fields[2]
        owner = r.fields[3] if len(r.fields) == 4 and r.fields[3] != "?" else ""
        out.append(JupyterAnswer(ep[0], ep[1], number(pid), number(code, 999) or 0, owner))
    return JupyterAuth(tuple(out), sockets, tuple(holders))


SPEC = FactSpec("jupyter_auth", ("jupyter", "jsock", "jport"), parse)
