"""One-command tunnels: the decisions (pure, no I/O).

What to forward and where (service selection, local port choice, remote target), who logs
in (team member or login user, which key), what URL to print (Jupyter token), when to retry
(backoff schedule), how to call OpenSSH (argv), what to run on the host to learn tokens, and
how to read its answer. The I/O lives in `provision.tunnel.session` (session, OpenSSH backend) and
`provision.tunnel.paramiko_backend` (paramiko backend).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import field

from provision.errors import UsageError
from provision.inventory.catalog import MEMBER_TOKEN_FILE
from provision.inventory.forwards import LOCAL_BIND, Forward, forward_for, remote_target
from provision.inventory.model import Host, Service
from provision.record import record
from provision.ssh.login import Hop

PORT_SEARCH = 100  # how far from the wanted port we look for a free one
KEEPALIVE_COUNT = 3  # OpenSSH ServerAliveCountMax and our own miss budget


class TunnelError(UsageError):
    """A problem the user must fix (bad names, no free port); exit status 2."""


@record
class ServiceState:
    """What the host said about a forwarded service."""

    listening: bool | None = None  # None: unknown
    token: str | None = None
    base_url: str = "/"
    note: str = ""
    own: bool = False  # a member's own server: only its token proves it is theirs
    held_by: tuple[str, ...] = ()  # uids listening on its port that are not its account's


@record
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


# --- what to forward -------------------------------------------------------------------

def select_services(host: Host, names: Sequence[str], user: str | None = None) -> tuple[Service, ...]:
    """The host's tunnel services `user` reaches (shared ones and their own per-user server,
    nobody else's), or only those named: `jupyter` names `user`'s own server when the
    service is per-user. Raises TunnelError on bad names."""
    tunnel = host.tunnel_services_for(user)
    if not names:
        if not tunnel:
            raise TunnelError(f"{host.name} has no service with expose: tunnel for "
                              f"{user or host.user} (services: "
                              f"{', '.join(s.name for s in host.services) or 'none'})")
        return tunnel
    out: list[Service] = []
    for name in names:
        svc = host.service(name) or host.service(f"{name}@{user}")
        if svc is not None and not svc.visible_to(user):
            raise TunnelError(f"{host.name}: {name} is {svc.member}'s own server; only "
                              f"{svc.member}'s login reads its token (--user {svc.member})")
        if svc is None and any(s.template == name for s in host.services):
            raise TunnelError(f"{host.name}: {name} is per-user and {user or host.user} has "
                              f"none (members: {', '.join(s.member or '' for s in host.services if s.template == name)})")
        if svc is None:
            known = ", ".join(s.name for s in tunnel) or "none"
            raise TunnelError(f"{host.name} has no service '{name}' (tunnel services: {known})")
        if svc.expose.kind != "tunnel":
            raise TunnelError(f"{host.name}: service '{name}' has expose: {svc.expose.kind}, "
                              f"not tunnel")
        if svc not in out:
            out.append(svc)
    return tuple(out)


def pick_local_port(wanted: int, is_free: Callable[[int], bool], taken: Iterable[int] = (),
                    search: int = PORT_SEARCH) -> int:
    """The wanted port when free, else the nearest free one above it, then below it."""
    used = set(taken)
    candidates = [wanted] + [wanted + d for d in range(1, search + 1)] \
        + [wanted - d for d in range(1, search + 1)]
    for port in candidates:
        if 1024 <= port <= 65535 and port not in used and is_free(port):
            return port
        if port == wanted and port < 1024 and port not in used and is_free(port):
            return port
    raise TunnelError(f"no free local port within {search} of {wanted}")


def local_port_wanted(service: Service, requested: dict[str, int] | None = None) -> int:
    """`--port NAME=PORT` (a member's server answers to its service's name too), else the
    forward's own local port."""
    asked = requested or {}
    return asked.get(service.name, asked.get(service.template or "",
                                             service.local_port or service.port))


def plan_forwards(services: Sequence[Service], is_free: Callable[[int], bool],
                  requested: dict[str, int] | None = None) -> tuple[Forward, ...]:
    """One forward per service, each on its own local port."""
    out: list[Forward] = []
    for s in services:
        want = local_port_wanted(s, requested)
        port = pick_local_port(want, is_free, taken=[f.local_port for f in out])
        out.append(forward_for(s).on_port(port))
    return tuple(out)


# --- who logs in --------------------------------------------------------------------------

# --- URLs and tokens ----------------------------------------------------------------------

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


# --- retries ------------------------------------------------------------------------------

def backoff(attempt: int, base: float = 1.0, cap: float = 30.0) -> float:
    """Seconds before reconnect attempt `attempt` (0-based): 1, 2, 4, … capped."""
    return float(min(cap, base * (2 ** max(0, attempt))))


def dead_after(keepalive: int, count: int = KEEPALIVE_COUNT) -> int:
    """Seconds of silence after which a link is declared dead."""
    return keepalive * count


# --- OpenSSH argv ---------------------------------------------------------------------------

def openssh_common(config: str, known_hosts: str | None, keepalive: int,
                   control_path: str | None = None) -> list[str]:
    opts = ["-F", config, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"ServerAliveInterval={keepalive}",
            "-o", f"ServerAliveCountMax={KEEPALIVE_COUNT}",
            "-o", "ConnectTimeout=10"]
    if known_hosts:
        opts += ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "GlobalKnownHostsFile=none"]
    if control_path:
        opts += ["-o", f"ControlPath={control_path}"]
    return opts


def openssh_target(target: Hop, jumps: Sequence[str]) -> list[str]:
    """Options and destination that reach the target host through the rendered config's jumps.

    The destination is the address, not the inventory name: the rendered config's block for
    the name carries LocalForwards for every tunnel service, which must not apply here (a
    busy port would fail the whole tunnel, and unselected services would be forwarded too).
    The jump hosts are resolved by name in the rendered config (the jump ssh gets `-F`).
    """
    argv = ["-p", str(target.port), "-l", target.user]
    if jumps:
        argv += ["-o", f"ProxyJump={','.join(jumps)}"]
    if target.identity_file:
        argv += ["-i", target.identity_file, "-o", "IdentitiesOnly=yes"]
    return [*argv, target.address]


def openssh_tunnel_argv(ssh: str, config: str, target: Hop, jumps: Sequence[str],
                        forwards: Sequence[Forward], known_hosts: str | None, keepalive: int,
                        control_path: str | None) -> list[str]:
    """`ssh -N` with one 127.0.0.1-bound -L per forward; it exits when a forward cannot bind."""
    argv = [ssh, *openssh_common(config, known_hosts, keepalive, control_path),
            "-N", "-o", "ExitOnForwardFailure=yes", "-o", "GatewayPorts=no"]
    if control_path:
        argv += ["-o", "ControlMaster=yes", "-o", "ControlPersist=no"]
    for f in forwards:
        to = f.remote_socket or f"{f.remote_host}:{f.remote_port}"
        argv += ["-L", f"{LOCAL_BIND}:{f.local_port}:{to}"]
    return argv + openssh_target(target, jumps)


def openssh_exec_argv(ssh: str, config: str, target: Hop, jumps: Sequence[str], command: str,
                      known_hosts: str | None, keepalive: int,
                      control_path: str | None) -> list[str]:
    """Run one command on the host, through the tunnel's master connection when there is one."""
    argv = [ssh, *openssh_common(config, known_hosts, keepalive, control_path), "-T",
            "-o", "ClearAllForwardings=yes"]
    if control_path:
        argv += ["-o", "ControlMaster=no"]
    return [*argv, *openssh_target(target, jumps), "--", command]


def ssh_argv(ssh: str, config: str, host: str, command: Sequence[str]) -> list[str]:
    """Interactive ssh to an inventory name through the rendered config (no forwards)."""
    argv = [ssh, "-F", config, "-o", "ClearAllForwardings=yes", host]
    return [*argv, "--", *command] if command else argv


def classify_ssh_error(stderr: str) -> str:
    """A one-line reason from OpenSSH's stderr."""
    text = stderr.strip()
    low = text.lower()
    if "remote host identification has changed" in low:
        return "host key verification failed: REMOTE HOST IDENTIFICATION HAS CHANGED"
    if "host key verification failed" in low or "no matching host key" in low \
            or ("host key for" in low and "not known" in low):
        which = next((ln.strip().rstrip(".") for ln in text.splitlines()
                      if "host key is known for" in ln), "")
        detail = f": {which[0].lower()}{which[1:]}" if which else " (unknown host key)"
        return f"host key verification failed{detail}; refusing to connect"
    if "permission denied" in low:
        return "authentication failed (permission denied)"
    if "address already in use" in low or "cannot listen to port" in low:
        return "a local port is already in use"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "ssh exited"


def is_host_key_failure(reason: str) -> bool:
    return reason.startswith("host key verification failed")


# --- rsync ----------------------------------------------------------------------------------

def remote_side(spec: str, names: Iterable[str]) -> str | None:
    """The inventory host named by an rsync spec `HOST:PATH` (or `USER@HOST:PATH`), if any."""
    if ":" not in spec or spec.startswith(("/", "./", "../")):
        return None
    head = spec.split(":", 1)[0]
    name = head.rsplit("@", 1)[-1]
    return name if name in set(names) else None


def rsync_argv(rsync: str, ssh: str, config: str, known_hosts: str | None, src: str, dst: str,
               extra: Sequence[str] = ()) -> list[str]:
    ssh_cmd = [ssh, "-F", config, "-o", "ClearAllForwardings=yes", "-o", "StrictHostKeyChecking=yes"]
    if known_hosts:
        ssh_cmd += ["-o", f"UserKnownHostsFile={known_hosts}"]
    return [rsync, "-avhP", "-e", shlex.join(ssh_cmd), *extra, src, dst]
