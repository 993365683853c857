"""Jupyter's findings (pure): a server without a token, and each member's own server
(answering, wanting a token, running as that member, its port or socket theirs)."""

from __future__ import annotations

from collections.abc import Sequence

from provision.facts import jupyter_auth as J
from provision.finding import Finding
from provision.inventory.model import Host, Service


def jupyter_findings(host: Host, answers: Sequence[J.JupyterAnswer]) -> list[Finding]:
    out = []
    for a in answers:
        if a.open:
            out.append(Finding("error", "jupyter-no-token", f"{host.name}:{a.port}/tcp",
                               f"the Jupyter server on {a.address}:{a.port} (pid {a.pid}) answers "
                               "/api/status without a token or password: anyone who reaches it runs "
                               "code as its user",
                               "start it with a token (provision's rendered config does), or a password"))
    return out


def member_server_findings(host: Host, auth: J.JupyterAuth) -> list[Finding]:
    """Each member's own Jupyter answers on its socket (or port), wants a token (403 without
    one; an open one is `jupyter-no-token`), and runs as that member; on a port, nobody else
    listens there in its place."""
    out = []
    by_port = {a.port: a for a in auth.answers if a.address in ("127.0.0.1", "::1")}
    for s in host.services:
        if s.member is None:
            continue
        subject = f"{host.name}/{s.name}"
        field = f"hosts.{host.name}.services.{s.template}.per_user"
        if s.socket is not None:
            out += _member_socket_findings(s, auth.sockets.get(s.member), subject, field)
            continue
        for h in auth.holders:
            if h.member == s.member and h.port == s.port and h.owner != s.member:
                out.append(Finding("error", "member-port-held", subject,
                                   f"127.0.0.1:{s.port}, {s.member}'s server port, is held by "
                                   f"pid {h.pid} of {h.owner}: {s.member}'s browser (and "
                                   "token) would reach it through her tunnel",
                                   "stop that process; use per_user_socket (the default) so "
                                   "no other account can take the server's place", field))
        a = by_port.get(s.port)
        if a is None or a.status == 0:
            out.append(Finding("error", "member-server-down", subject,
                               f"{s.member}'s Jupyter ({s.unit_name}) does not answer on "
                               f"127.0.0.1:{s.port}",
                               f"see `journalctl -u {s.unit_name}`; `provision apply` starts it",
                               field))
            continue
        if a.status not in (200, 403):
            out.append(Finding("warning", "member-server-answer", subject,
                               f"{s.member}'s Jupyter on 127.0.0.1:{s.port} answers /api/status "
                               f"with HTTP {a.status} (a server that wants a token says 403)",
                               "check what listens there", field))
        if a.owner and a.owner != s.member:
            out.append(Finding("error", "member-server-owner", subject,
                               f"the Jupyter on 127.0.0.1:{s.port} (pid {a.pid}) runs as "
                               f"{a.owner}, not {s.member}: whoever holds its token runs code "
                               f"as {a.owner}",
                               f"stop it; `provision apply` starts {s.unit_name} as {s.member}",
                               field))
    return out


def _member_socket_findings(s: Service, a: J.SocketAnswer | None, subject: str,
                     field: str) -> list[Finding]:
    """A member's server on its Unix socket, as the member found it."""
    where = f"{s.member}'s Jupyter ({s.unit_name}) on {s.socket}"
    if a is None or a.state in ("absent", "nouser") or a.status == 0:
        why = "has no socket" if a is not None and a.state == "absent" else "does not answer"
        return [Finding("error", "member-server-down", subject, f"{where} {why}",
                        f"see `journalctl -u {s.unit_name}`; `provision apply` starts it", field)]
    if a.state == "foreign":
        return [Finding("error", "member-server-owner", subject,
                        f"{where}: the socket is not {s.member}'s",
                        f"`provision apply` restarts {s.unit_name}", field)]
    if a.status == 200:
        return [Finding("error", "jupyter-no-token", subject,
                        f"{where} answers without a token: whoever reaches the socket runs code "
                        f"as {s.member}", "start it with a token (provision's rendered config "
                        "does)", field)]
    if a.status != 403:
        return [Finding("warning", "member-server-answer", subject,
                        f"{where} answers /api/status with HTTP {a.status} (a server that "
                        "wants a token says 403)", "check what listens there", field)]
    return []
