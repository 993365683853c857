"""What a tunnel prints per forward (pure): its URL (with the token) and its status."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from provision.frozen import frozen
from provision.inventory.forwards import Forward
from provision.tunnel.tokens import ServiceState


@frozen
class Row:
    """One line of the output table / JSON."""

    service: str
    url: str
    local: str
    remote: str
    status: str
    listening: bool | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {"service": self.service, "url": self.url, "local": self.local,
                "remote": self.remote, "status": self.status, "listening": self.listening}




def service_url(fwd: Forward, state: ServiceState) -> str:
    scheme = fwd.scheme
    base = state.base_url if state.base_url.startswith("/") else "/" + state.base_url
    if not base.endswith("/"):
        base += "/"
    if scheme not in ("http", "https"):
        return f"{scheme}://{fwd.local}"
    url = f"{scheme}://{fwd.local}{base}"
    if state.token:
        url += f"?token={state.token}"
    return url



def nothing_listening(fwd: Forward, host: str) -> str:
    return f"{fwd.service}: nothing listening on {fwd.remote} on {host}"


def rows(forwards: Sequence[Forward], states: dict[str, ServiceState], host: str) -> list[Row]:
    out = []
    for f in forwards:
        st = states.get(f.service, ServiceState())
        if st.listening is False:
            status = "nothing listening"
        elif st.note:
            status = st.note
        else:
            status = "ok" if st.listening else "forwarded"
        out.append(Row(f.service, service_url(f, st), f.local, f"{host}:{f.remote}", status,
                       st.listening))
    return out
