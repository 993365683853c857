"""`sshd:` on hosts, roles and bastions: the sshd options that are a team's choice, within
bounds, and the ones that undo the hardening, refused with the reason. Pure.

Values arrive validated by the schema (`SshdDoc`, `BastionSshdDoc`); a role's options apply
to its hosts in role order, the host's own win (`merged`). What needs the whole inventory
(who would be locked out, what a bastion's PermitOpen would cut off) is `access_problems`.
AllowGroups is checked on the host, where the accounts' groups are known
(`provision.steps.sshd_access`). The rendered drop-in is `templates/sshd_config.conf.j2`.
"""

from __future__ import annotations

import ipaddress
import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt

from .fields import User, is_hostname

# Key -> why the inventory may not set it. Keys are compared lower-case, as sshd does.
_KEYS_ONLY = ("provision's hosts take keys only: a password can be guessed or phished, a key "
              "cannot; remove the key from `sshd:`")
REFUSED: dict[str, str] = {
    "passwordauthentication": f"PasswordAuthentication stays no: {_KEYS_ONLY}",
    "kbdinteractiveauthentication": f"KbdInteractiveAuthentication (PAM's password prompt) "
                                    f"stays no: {_KEYS_ONLY}",
    "challengeresponseauthentication": f"ChallengeResponseAuthentication (old name of "
                                       f"KbdInteractiveAuthentication) stays no: {_KEYS_ONLY}",
    "permitemptypasswords": f"PermitEmptyPasswords stays no: {_KEYS_ONLY}",
    "authenticationmethods": f"AuthenticationMethods stays publickey: {_KEYS_ONLY}",
    "pubkeyauthentication": f"PubkeyAuthentication stays yes: {_KEYS_ONLY}",
    "permitrootlogin": ("PermitRootLogin stays prohibit-password: root logs in with a key or not "
                        "at all, never with a password (the login user may be root)"),
    "permituserenvironment": ("PermitUserEnvironment stays no: ~/.ssh/environment would let a "
                              "member set LD_PRELOAD for sshd's session"),
    "allowagentforwarding": ("AllowAgentForwarding stays no: a forwarded agent lets root on "
                             "the host (or anyone who is root there) use your keys elsewhere; "
                             "use ProxyJump instead"),
    "gatewayports": ("GatewayPorts stays no: a remote forward would listen on every address, "
                     "past the host firewall's intent"),
    "permittunnel": "PermitTunnel stays no: a tun device is a way past the host firewall",
    "allowstreamlocalforwarding": ("AllowStreamLocalForwarding follows the members' servers on "
                                   "Unix sockets (provision sets it)"),
    "kexalgorithms": "the algorithms stay provision's (ssh-audit clean, paramiko-compatible)",
    "ciphers": "the algorithms stay provision's (ssh-audit clean, paramiko-compatible)",
    "macs": "the algorithms stay provision's (ssh-audit clean, paramiko-compatible)",
    "hostkeyalgorithms": "the algorithms stay provision's (ssh-audit clean, paramiko-compatible)",
    "pubkeyacceptedalgorithms": ("the algorithms stay provision's (the team's keys add theirs; "
                                 "never ssh-rsa/SHA-1)"),
    "port": ("provision does not move sshd's port (a socket-activated sshd would not follow; "
             "the firewall and jump chains name the port from `port:`)"),
    "listenaddress": "provision does not move where sshd listens",
    "match": "a Match block in the inventory is not supported: set options per host or role",
    "include": "the inventory sets options, not files to include",
    "usepam": "UsePAM stays as the host has it (sessions, limits and the umask come from PAM)",
    "loglevel": "LogLevel stays VERBOSE: key fingerprints in the log say who logged in",
    "strictmodes": "StrictModes stays yes: sshd ignores keys in files others may write",
}
# PermitOpen narrows a bastion's ProxyJump; on a host it would also cut the tunnels.
HOST_REFUSED = {**REFUSED, "permitopen": (
    "PermitOpen narrows what a bastion forwards to (its ProxyJump targets); on a host it would "
    "also cut `provision tunnel` and a remote editor's forwards: set it on a bastion")}

# provision holds up to 3 sessions on one connection: the host lock's held probe, the
# apply, the stop of an interrupted apply. Measured: under MaxSessions 1 a no-op apply
# works (one exec) and every change fails, so provision could not even put it back.
MAX_SESSIONS = (3, 64)
CLIENT_ALIVE_INTERVAL = (10, 900)  # 0 (off) would keep a dead client's session forever
CLIENT_ALIVE_COUNT_MAX = (1, 10)
MAX_AUTH_TRIES = (1, 6)
LOGIN_GRACE_TIME = (10, 120)


def _yes_no(value: bool | str) -> str:
    return ("yes" if value else "no") if isinstance(value, bool) else value


Forwarding = Annotated[StrictBool | Literal["no", "local", "remote", "all", "yes"],
                       AfterValidator(_yes_no)]
YesNo = Annotated[StrictBool | Literal["no", "yes"], AfterValidator(_yes_no)]


def _bounded(lo: int, hi: int) -> Any:
    return Annotated[StrictInt, Field(ge=lo, le=hi)]


_PORT = r"(\*|[0-9]{1,5})"


def check_permit_open(value: str) -> str:
    """`host:port` as sshd's PermitOpen reads it (an IPv6 address in brackets, `*` for any
    port), or `any` / `none` alone."""
    if value in ("any", "none"):
        return value
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:" + _PORT, value) or re.fullmatch(
        r"([^:\[\]\s]+):" + _PORT, value)
    if m is None:
        raise ValueError(f"{value!r} is not host:port ([v6 address]:port; port a number or *), "
                         "'any' or 'none'")
    host, port = m.groups()
    ok_host = host == "*" or is_hostname(host)
    try:
        ipaddress.ip_address(host)
        ok_host = True
    except ValueError:
        pass
    if not ok_host or (port != "*" and not 1 <= int(port) <= 65535):
        raise ValueError(f"{value!r} is not host:port (a host name or address; a port 1-65535 or *)")
    return value


OpenTarget = Annotated[str, AfterValidator(check_permit_open)]
Names = Annotated[list[User], Field(min_length=1, max_length=64)]


class SshdDoc(BaseModel):
    """The sshd options a host or role may set (keys as sshd_config spells them)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    refused: ClassVar[Mapping[str, str]] = HOST_REFUSED  # build's unknown-key message reads it

    allow_tcp_forwarding: Forwarding | None = Field(
        None, alias="AllowTcpForwarding",
        description="no (default without tunnel services), local (VS Code Remote-SSH: -L and "
                    "-D), remote, yes/all")
    x11_forwarding: YesNo | None = Field(None, alias="X11Forwarding", description="default no")
    max_sessions: _bounded(*MAX_SESSIONS) | None = Field(  # type: ignore[valid-type]
        None, alias="MaxSessions", description="sessions per connection, 3-64 (default 4; provision itself needs 3)")
    client_alive_interval: _bounded(*CLIENT_ALIVE_INTERVAL) | None = Field(  # type: ignore[valid-type]
        None, alias="ClientAliveInterval", description="seconds, 10-900 (default 60)")
    client_alive_count_max: _bounded(*CLIENT_ALIVE_COUNT_MAX) | None = Field(  # type: ignore[valid-type]
        None, alias="ClientAliveCountMax",
        description="unanswered probes before sshd drops the client, 1-10 (default 2)")
    max_auth_tries: _bounded(*MAX_AUTH_TRIES) | None = Field(  # type: ignore[valid-type]
        None, alias="MaxAuthTries", description="1-6 (default 3)")
    login_grace_time: _bounded(*LOGIN_GRACE_TIME) | None = Field(  # type: ignore[valid-type]
        None, alias="LoginGraceTime", description="seconds, 10-120 (default 30)")
    allow_users: Names | None = Field(
        None, alias="AllowUsers",
        description="only these accounts log in (must hold the login user and the members "
                    "who tunnel to this node)")
    allow_groups: Names | None = Field(
        None, alias="AllowGroups",
        description="only members of these groups log in (checked on the host: the login "
                    "user and the members who tunnel must be in one)")


class BastionSshdDoc(SshdDoc):
    """A bastion's: also PermitOpen, which narrows its ProxyJump targets."""

    refused: ClassVar[Mapping[str, str]] = REFUSED
    permit_open: Annotated[list[OpenTarget], Field(min_length=1, max_length=256)] | None = Field(
        None, alias="PermitOpen",
        description="host:port this bastion forwards to: must admit every node reached "
                    "through it, as its address and port are written")


# --- the options a node gets ------------------------------------------------------------

Options = tuple[tuple[str, str], ...]  # (sshd keyword, value as rendered), in doc order
FieldPath = tuple[str | int, ...]


def _value(v: Any) -> str:
    return " ".join(str(x) for x in v) if isinstance(v, list) else str(v)


def set_options(doc: SshdDoc | None) -> dict[str, str]:
    """The options a doc sets (sshd keyword -> rendered value), in the schema's order."""
    if doc is None:
        return {}
    fields = type(doc).model_fields
    return {str(f.alias): _value(getattr(doc, name)) for name, f in fields.items()
            if name in doc.model_fields_set and getattr(doc, name) is not None}


def merged(layers: Sequence[tuple[FieldPath, SshdDoc | None]]) -> tuple[Options, dict[str, FieldPath]]:
    """Roles in order, then the host: a later layer's option wins. Also where each came from."""
    out: dict[str, str] = {}
    where: dict[str, FieldPath] = {}
    for path, doc in layers:
        for key, value in set_options(doc).items():
            out[key] = value
            where[key] = (*path, "sshd", key)
    return tuple(out.items()), where


def get(options: Options, key: str) -> str | None:
    return next((v for k, v in options if k == key), None)


# --- checks that need the whole inventory -------------------------------------------------

Fail = Callable[[FieldPath, str], None]


def forwarding_problem(options: Options, tunnels: Iterable[str], bastion: bool) -> str | None:
    """AllowTcpForwarding that would break what provision itself forwards, or None."""
    value = get(options, "AllowTcpForwarding")
    if value is None or value in ("local", "yes", "all"):
        return None
    if bastion:
        return (f"AllowTcpForwarding {value} would stop this bastion's ProxyJump (a jump is a "
                "local forward): use local or yes")
    names = sorted(tunnels)
    if names:
        return (f"AllowTcpForwarding {value} would break `provision tunnel` to "
                f"{', '.join(names)} on this host: use local or yes")
    return None


def locked_out(options: Options, required: Mapping[str, str]) -> str | None:
    """Who AllowUsers would lock out (`required`: account -> why it must log in), or None."""
    allowed = get(options, "AllowUsers")
    if allowed is None:
        return None
    names = set(allowed.split())
    out = [f"{u} ({why})" for u, why in required.items() if u not in names]
    if not out:
        return None
    return "AllowUsers would lock out " + ", ".join(out) + ": add them to AllowUsers"


def permit_open_problem(options: Options, targets: Mapping[str, str]) -> str | None:
    """Which node behind a bastion its PermitOpen would cut off (`targets`: node -> the
    host:port the hop before it asks the bastion for), or None."""
    value = get(options, "PermitOpen")
    if value is None:
        return None
    allowed = value.split()
    if "any" in allowed:
        return None

    def admits(target: str) -> bool:
        host, _, port = target.rpartition(":")
        for a in allowed:
            ah, _, ap = a.rpartition(":")
            if ah.lower() in (host.lower(), "*") and ap in (port, "*"):
                return True
        return False

    cut = [f"{n} ({t})" for n, t in targets.items() if not admits(t)]
    if not cut:
        return None
    return ("PermitOpen would cut off " + ", ".join(cut)
            + ", reached through this bastion: add host:port exactly as written there")


def target(address: str, port: int) -> str:
    """What a jump asks the bastion to connect to, as PermitOpen spells it."""
    try:
        if ipaddress.ip_address(address).version == 6:
            return f"[{address}]:{port}"
    except ValueError:
        pass
    return f"{address}:{port}"


def own_servers(node: Any) -> dict[str, str]:
    """Members who reach their own server on `node` over their own login -> which."""
    out: dict[str, str] = {}
    for s in node.tunnel_services:
        if s.member is not None:
            out.setdefault(s.member, s.name)
    return out


def required_logins(nodes: Sequence[Any]) -> dict[str, dict[str, str]]:
    """node name -> account -> why it must be able to log in there: the node's login user,
    the members who tunnel to their own server on it, and on a bastion the members who
    tunnel through it."""
    out: dict[str, dict[str, str]] = {n.name: {n.user: "the login user"} for n in nodes}
    for n in nodes:
        for member, service in own_servers(n).items():
            out[n.name].setdefault(member, f"tunnels to their {service}")
            for b in n.jump_chain:
                if b in out:
                    out[b].setdefault(member, f"tunnels to their {service} on {n.name} "
                                              "through this bastion")
    return out


def jump_targets(nodes: Sequence[Any]) -> dict[str, dict[str, str]]:
    """bastion name -> node behind it -> the host:port the jump asks it to connect to."""
    by_name = {n.name: n for n in nodes}
    out: dict[str, dict[str, str]] = {}
    for n in nodes:
        hops = [*n.jump_chain, n.name]
        for b, nxt in itertools.pairwise(hops):
            after = by_name.get(nxt)
            if after is not None:
                out.setdefault(b, {})[nxt] = target(after.address, after.port)
    return out


def access_problems(nodes: Sequence[Any],
                    where: Callable[[str, str], FieldPath]) -> list[tuple[FieldPath, str]]:
    """Options that would lock someone out or break provision's own forwarding, each with
    where the option was written (`where(node, keyword)`)."""
    problems: list[tuple[FieldPath, str]] = []
    logins = required_logins(nodes)
    targets = jump_targets(nodes)
    for n in nodes:
        why = forwarding_problem(n.sshd, (s.name for s in n.tunnel_services), n.is_bastion)
        if why:
            problems.append((where(n.name, "AllowTcpForwarding"), why))
        why = locked_out(n.sshd, logins[n.name])
        if why:
            problems.append((where(n.name, "AllowUsers"), why))
        if n.is_bastion:
            why = permit_open_problem(n.sshd, targets.get(n.name, {}))
            if why:
                problems.append((where(n.name, "PermitOpen"), why))
    return problems
