"""What a tunnel asks the host, and how it reads the answer (pure): one probe command (is
each service listening, its Jupyter token, who holds its port), the service's state from
the answer (a token refused when it is not plain URL text, withheld when another account
could be listening in the server's place), and what `tunnel --check` asks."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence

from provision.frozen import frozen
from provision.inventory.catalog import MEMBER_TOKEN_FILE
from provision.inventory.forwards import remote_target
from provision.inventory.model import Service


@frozen
class ServiceState:
    """What the host said about a forwarded service."""

    listening: bool | None = None  # None: unknown
    token: str | None = None
    base_url: str = "/"
    note: str = ""
    own: bool = False  # a member's own server: only its token proves it is theirs
    held_by: tuple[str, ...] = ()  # uids listening on its port that are not its account's




def jupyter_bin(service: Service) -> str:
    return f"{service.venv.rstrip('/')}/bin/jupyter" if service.venv else "jupyter"


def token_command(service: Service, login_user: str) -> str:
    """Run on the host: list running Jupyter servers as the service's user (JSON lines)."""
    listing = f"{shlex.quote(jupyter_bin(service))} server list --json"
    if service.user != login_user:
        listing = f"sudo -n -H -u {shlex.quote(service.user)} {listing}"
    return listing


PROBE_BEGIN = "--provision-probe--"


def probe_command(services: Sequence[Service], login_user: str, check_listening: bool) -> str:
    """One remote command: per service a listening check and, for Jupyter, the token list.

    Prints `PROBE_BEGIN <service> <kind>` before each section; `listen` sections hold
    `yes`/`no`, `jupyter` sections the output of `jupyter server list --json`.
    """
    parts = []
    for s in services:
        tag = shlex.quote(s.name)
        if check_listening and s.socket is not None:
            # the member's socket, theirs (in a directory of theirs: nobody else's can be there)
            sock = shlex.quote(s.socket)
            parts.append(f"echo {PROBE_BEGIN} {tag} listen; "
                         f"if [ -S {sock} ] && [ -O {sock} ]; then echo yes; else echo no; fi")
        elif check_listening:
            target = remote_target(s)
            check = f"exec 3<>/dev/tcp/{target}/{s.port}"
            parts.append(f"echo {PROBE_BEGIN} {tag} listen; "
                         f"if timeout 5 bash -c {shlex.quote(check)} 2>/dev/null; "
                         f"then echo yes; else echo no; fi")
        if s.member is not None and s.member == login_user:
            # the member's own token file, read as the member over their own login (the
            # token travels in this channel only, never on a command line)
            parts.append(f"echo {PROBE_BEGIN} {tag} token; "
                         f"cat -- {MEMBER_TOKEN_FILE} 2>&1 </dev/null; echo")  # no newline in it

        elif s.is_jupyter and s.member is None:
            parts.append(f"echo {PROBE_BEGIN} {tag} jupyter; "
                         f"{token_command(s, login_user)} 2>&1 </dev/null")
    parts += owners_parts(services)
    return "bash -c " + shlex.quote("; ".join(parts) or "true")


def owners_parts(services: Sequence[Service]) -> list[str]:
    """Per service on a loopback port: its account's uid, then who listens on its port (any
    account may take a port of the shared loopback while the service is down)."""
    return [f"echo {PROBE_BEGIN} {shlex.quote(s.name)} owners; "
            f"{port_owners_command(s.port, s.user)}" for s in services if s.socket is None]


def owners_command(services: Sequence[Service]) -> str:
    """What the tunnel asks, every WATCH_SECONDS, about the services it forwards to ports."""
    return "bash -c " + shlex.quote("; ".join(owners_parts(services)) or "true")


def held_by(service: Service, sections: dict[str, str]) -> tuple[str, ...]:
    """The uids listening on the service's port that are not its own account's (none when
    the host did not say, or the account is unknown there)."""
    held = port_holders(sections.get("owners", ""))
    if held is None:
        return ()
    return tuple(u for u in held[1] if u != held[0])


PROC_NET_TCP = ("/proc/net/tcp", "/proc/net/tcp6")


def port_owners_command(port: int, user: str | None = None,
                        tables: Sequence[str] = PROC_NET_TCP) -> str:
    """Run on the host: the uid of `user` (default: whoever runs it), then the uids of every
    TCP socket listening on `port` (from /proc/net/tcp{,6}, which any account may read),
    one line. The tables go through cat: mawk (Debian's awk) stops without its END at a
    file it cannot open, and a host without IPv6 has no tcp6."""
    me = f"$(id -u -- {shlex.quote(user)})" if user else "$(id -u)"
    return (f"cat -- {' '.join(shlex.quote(t) for t in tables)} 2>/dev/null | "
            f"awk -v p=:{port:04X} -v me=\"{me}\" 'BEGIN {{ printf \"%s\", me }} "
            "$4 == \"0A\" && substr($2, length($2) - 4) == p { printf \" %s\", $8 } "
            "END { print \"\" }'")


def port_holders(text: str) -> tuple[str, list[str]] | None:
    """(the member's uid, the uids listening on their server's port) from the `owners`
    section; None when the section says nothing usable."""
    uids = text.split()
    if not uids or not all(u.isascii() and u.isdigit() for u in uids):
        return None
    return uids[0], sorted(set(uids[1:]))


def parse_probe(output: str) -> dict[str, dict[str, str]]:
    """Sections of the probe output: service -> kind -> text."""
    out: dict[str, dict[str, str]] = {}
    current: tuple[str, str] | None = None
    for line in output.splitlines():
        if line.startswith(PROBE_BEGIN + " "):
            _, name, kind = ([*line.split(" ", 2), "", ""])[:3]
            out.setdefault(name, {})[kind] = ""
            current = (name, kind)
        elif current is not None:
            out[current[0]][current[1]] += line + "\n"
    return out


# `jupyter server list` is the host's output, and what it says ends up in a URL the operator
# opens: a token is URL-safe text (Jupyter's own are hex), a base URL an absolute path of
# plain path characters. Anything else (`@evil.example/`, `//evil/`, `?x=`, an escape
# sequence) would send the browser, and the token, elsewhere, or write to the terminal.
_TOKEN = re.compile(r"^[A-Za-z0-9._~-]{1,256}$")
_BASE_URL = re.compile(r"^/(?!/)[A-Za-z0-9._~/-]{0,255}$")
MAX_JUPYTER_LINE = 64 * 1024


def parse_jupyter_list(text: str, port: int) -> ServiceState | None:
    """The entry of `jupyter server list --json` serving on `port`, if any. An entry whose
    token or base URL is not plain URL text is refused: the state says why, without them."""
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{") or len(line) > MAX_JUPYTER_LINE:
            continue
        try:
            info = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        if not isinstance(info, dict):
            continue
        listed = info.get("port")
        if type(listed) is not int or listed != port:  # "8888", 8888.0, true: not this server
            continue
        token, base_url = info.get("token") or None, info.get("base_url") or "/"
        if (token is not None and not (isinstance(token, str) and _TOKEN.match(token))) or not (
                isinstance(base_url, str) and _BASE_URL.match(base_url)):
            return ServiceState(listening=None, note="token unknown: the host's `jupyter server "
                                "list` answer was refused (its token or base_url is not plain "
                                "URL text)")
        return ServiceState(listening=None, token=token, base_url=base_url)
    return None


def service_state(service: Service, sections: dict[str, str], login_user: str) -> ServiceState:
    """Combine a service's probe sections into what we know about it."""
    listen = sections.get("listen", "").strip()
    listening = True if listen == "yes" else False if listen == "no" else None
    if service.member is not None:
        return member_token_state(service, sections, login_user, listening)
    others = held_by(service, sections)
    if others:
        return ServiceState(listening=listening, held_by=others,
                            note=held_note(service, others))
    if not service.is_jupyter:
        return ServiceState(listening=listening)
    text = sections.get("jupyter", "")
    found = parse_jupyter_list(text, service.port)
    if found is not None:
        return ServiceState(listening=listening, token=found.token, base_url=found.base_url,
                            note=found.note)
    if "password is required" in text or "a password" in text:
        note = f"token unknown: sudo to {service.user} needs a password"
    elif "sudo" in text and service.user != login_user:
        note = f"token unknown: cannot run as {service.user}"
    elif "not found" in text:
        note = f"token unknown: {jupyter_bin(service)} not found"
    else:
        note = "token unknown: no running server listed on that port"
    return ServiceState(listening=listening, note=note)


def member_token_state(service: Service, sections: dict[str, str], login_user: str,
                       listening: bool | None) -> ServiceState:
    """A member's own server: the token their file holds, read by their own login."""
    if service.member != login_user:
        return ServiceState(listening=listening, own=True,
                            note=f"token unknown: only {service.member}'s login reads it")
    if "token" not in sections:
        return ServiceState(listening=listening, own=True, note="token unknown: not asked")
    text = sections["token"].strip()
    if _TOKEN.match(text) and service.socket is not None:
        # their socket lies in a directory of theirs: no other account can listen there
        return ServiceState(listening=listening, own=True, token=text)
    # The port is known to all (a function of the name) and any account may take it while
    # the member's server is down: the token goes only to a port the member's own server
    # listens on, and nobody else's.
    held = port_holders(sections.get("owners", ""))
    if _TOKEN.match(text) and held is None:
        return ServiceState(listening=listening, own=True, note="token withheld: the host did "
                            f"not say who listens on port {service.port}")
    others = held_by(service, sections)
    if others:
        return ServiceState(listening=listening, own=True, held_by=others,
                            note=f"token withheld: port {service.port} on the host is held by "
                                 f"uid {', '.join(others)}, not {service.member} (another "
                                 "account listening in place of their server would be sent it)")
    if _TOKEN.match(text) and held is not None and held[0] not in held[1]:
        return ServiceState(listening=listening, own=True,
                            note=f"token withheld: {service.member}'s server does not listen "
                                 f"on port {service.port} (while it is down another account "
                                 "could take the port and be sent the token)")
    if _TOKEN.match(text):
        return ServiceState(listening=listening, own=True, token=text)
    if "No such file" in text:
        why = "no token file yet (the server makes it when it starts)"
    elif "Permission denied" in text:
        why = "the token file is not readable by its member"
    else:
        why = "the token file holds no plain token"
    return ServiceState(listening=listening, own=True, note=f"token unknown: {why}")


def held_note(service: Service, others: Sequence[str]) -> str:
    return (f"not forwarded: port {service.port} on the host is held by uid "
            f"{', '.join(others)}, not {service.user} (another account listening in its place "
            "would get what the browser sends)")


def check_request(state: ServiceState) -> tuple[str, bool] | None:
    """What `tunnel --check` asks a forward: (path, whether only a 200 passes). A Jupyter
    whose token we know is asked /api/status with it, so the check proves the token opens
    that server (without it Jupyter answers 403). None: nothing passes (a member's own server
    whose token is unknown or withheld: whatever answers there is not known to be theirs)."""
    if state.own and not state.token:
        return None
    if state.token:
        base = state.base_url if state.base_url.endswith("/") else state.base_url + "/"
        return f"{base}api/status?token={state.token}", True
    return "/", False


def check_passed(answer: str | None, need_ok: bool) -> bool:
    """An HTTP status line that passes the check (any answer, or a 200 when asked)."""
    if answer is None:
        return False
    return not need_ok or answer.split()[1:2] == ["200"]
