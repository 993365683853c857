"""Every rendered file: the Jinja environment, the data each template gets, the artifacts.

Pure apart from `write_tree`: the model in, text out. Templates come from
`provision._templates` (the top-level `templates/` folder, shipped in the wheel) through
importlib.resources, so a non-editable install renders the same as a checkout. Output is
deterministic: no timestamps, sorted wherever order carries no meaning.

What lands on a node (bastion or host), see `render_host`:

| kind                 | path                                                     |
|----------------------|----------------------------------------------------------|
| sshd                 | /etc/ssh/sshd_config.d/50-provision.conf                 |
| iptables-v4 / -v6    | /etc/iptables/rules.v4, /etc/iptables/rules.v6           |
| iptables-docker-v4/6 | /etc/iptables/provision-docker.v4, .v6                   |
| firewall-script      | /usr/local/sbin/provision-firewall (loads + hooks chains)|
| unit                 | /etc/systemd/system/provision-firewall.service           |
| unit-dropin          | /etc/systemd/system/docker.service.d/50-provision.conf   |
| unit                 | /etc/systemd/system/provision-<service>.service          |
| jupyter-config       | /etc/provision/jupyter/<service>/jupyter_server_config.py|

Directories a service needs (TensorBoard's logdir, a notebook_dir) are not files: the
converge step creates them from `host_directories`.
"""

from __future__ import annotations

import functools
import importlib.resources
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from provision.firewall_rules import (
    DOCKER_CHAIN,
    HOOKS,
    INPUT_CHAIN,
    HostFirewall,
    RenderError,
    Ruleset,
    host_firewall,
)
from provision.forwards import local_forwards
from provision.inventory.model import Host, Inventory, Service

__all__ = [
    "Artifact",
    "RenderError",
    "host_directories",
    "render_host",
    "render_ssh_config",
    "write_tree",
]

SSHD_DROPIN = "/etc/ssh/sshd_config.d/50-provision.conf"
SSHD_SERVICE = "ssh.service"  # Debian's unit name
RULES_DIR = "/etc/iptables"
RULES_V4 = f"{RULES_DIR}/rules.v4"
RULES_V6 = f"{RULES_DIR}/rules.v6"
DOCKER_V4 = f"{RULES_DIR}/provision-docker.v4"
DOCKER_V6 = f"{RULES_DIR}/provision-docker.v6"
FIREWALL_SCRIPT = "/usr/local/sbin/provision-firewall"
FIREWALL_UNIT = "provision-firewall.service"
UNIT_DIR = "/etc/systemd/system"
DOCKER_DROPIN = f"{UNIT_DIR}/docker.service.d/50-provision.conf"
JUPYTER_CONFIG_DIR = "/etc/provision/jupyter"

# sshd algorithms (OpenSSH 9.2, Debian 12). paramiko needs curve25519-sha256, aes-gcm/ctr
# and the etm MACs; ssh-audit warns (no failure) about curve25519 without post-quantum.
KEX = ("sntrup761x25519-sha512@openssh.com", "curve25519-sha256", "curve25519-sha256@libssh.org")
CIPHERS = ("aes256-gcm@openssh.com", "aes128-gcm@openssh.com", "aes256-ctr", "aes128-ctr")
MACS = ("hmac-sha2-512-etm@openssh.com", "hmac-sha2-256-etm@openssh.com")
HOST_KEY_ALGORITHMS = (
    "ssh-ed25519", "ssh-ed25519-cert-v01@openssh.com",
    "rsa-sha2-512", "rsa-sha2-512-cert-v01@openssh.com",
    "rsa-sha2-256", "rsa-sha2-256-cert-v01@openssh.com",
)
# Extra user-key algorithms, added only when a team member's key needs one (never ssh-rsa/SHA-1).
_KEY_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "ecdsa-sha2-nistp256": ("ecdsa-sha2-nistp256", "ecdsa-sha2-nistp256-cert-v01@openssh.com"),
    "ecdsa-sha2-nistp384": ("ecdsa-sha2-nistp384", "ecdsa-sha2-nistp384-cert-v01@openssh.com"),
    "ecdsa-sha2-nistp521": ("ecdsa-sha2-nistp521", "ecdsa-sha2-nistp521-cert-v01@openssh.com"),
    "sk-ssh-ed25519@openssh.com": ("sk-ssh-ed25519@openssh.com",
                                   "sk-ssh-ed25519-cert-v01@openssh.com"),
    "sk-ecdsa-sha2-nistp256@openssh.com": ("sk-ecdsa-sha2-nistp256@openssh.com",
                                           "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com"),
}
CLIENT_ALIVE_INTERVAL = 60
CLIENT_ALIVE_COUNT_MAX = 3


@dataclass(frozen=True)
class Artifact:
    """One file that lands on a node (or, for ssh_config, on the operator's machine)."""

    path: str  # absolute remote path
    content: str
    kind: str  # sshd | iptables-v4 | iptables-v6 | iptables-docker-v4 | iptables-docker-v6 |
    #            firewall-script | unit | unit-dropin | jupyter-config
    mode: int = 0o644
    owner: str = "root"
    group: str = "root"
    service: str | None = None  # the systemd unit to reload/restart when this changes


# --- the Jinja environment -------------------------------------------------------------

def _load_template(name: str) -> str:
    return importlib.resources.files("provision._templates").joinpath(name).read_text("utf-8")


def _py_literal(value: Any) -> str:
    if not isinstance(value, str | int | bool):
        raise RenderError(f"cannot write {type(value).__name__} as a Python literal")
    return repr(value)


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.filters["py"] = _py_literal
    return env


def _render(template: str, **data: Any) -> str:
    return environment().get_template(template).render(**data)


# --- ssh_config (the operator's machine) -------------------------------------------------

def render_ssh_config(inv: Inventory, *, user: str | None = None, identity_file: str | None = None,
                      known_hosts: str | None = None) -> str:
    """The ssh_config for the whole inventory: a block per bastion and host, defaults last.

    `user`/`identity_file` override the login for every block (team members:
    `provision tunnel --user alice`); with `user` alone, the team member's own
    `identity_file` from the inventory is used when there is one.
    """
    if user is not None and identity_file is None:
        person = next((p for p in inv.team if p.name == user), None)
        identity_file = person.identity_file if person else None
    nodes = (*sorted(inv.bastions, key=lambda h: h.name), *sorted(inv.hosts, key=lambda h: h.name))
    blocks = []
    for node in nodes:
        forwards = local_forwards(node)
        blocks.append({
            "name": node.name,
            "hostname": node.address,
            "user": user or node.user,
            "port": node.port,
            "identity_file": identity_file or node.identity_file,
            "proxy_jump": [b.name for b in inv.chain(node)],
            "forwards": forwards,
        })
    return _render("ssh_config.j2", source=_source_name(inv), blocks=blocks,
                   names=[n.name for n in nodes], known_hosts=known_hosts or inv.known_hosts)


def _source_name(inv: Inventory) -> str:
    return ",".join(os.path.basename(s.rstrip("/")) for s in inv.source.split(",")) or "inventory"


# --- per node ----------------------------------------------------------------------------

def _pubkey_algorithms(inv: Inventory) -> tuple[str, ...]:
    extra = {alg for p in inv.team for key in p.keys
             for alg in _KEY_ALGORITHMS.get(key.split()[0], ())}
    return (*HOST_KEY_ALGORITHMS, *sorted(extra))


def _sshd(inv: Inventory, host: Host) -> Artifact:
    if host.is_bastion:
        forwarding, reason = "local", "a bastion serves ProxyJump (local forwarding only)"
    elif host.tunnel_services:
        forwarding, reason = "local", "tunnel services: " + ", ".join(
            sorted(s.name for s in host.tunnel_services))
    else:
        forwarding, reason = "no", "no tunnel services and not a bastion"
    content = _render(
        "sshd_config.conf.j2", host=host.name, allow_tcp_forwarding=forwarding,
        forwarding_reason=reason, client_alive_interval=CLIENT_ALIVE_INTERVAL,
        client_alive_count_max=CLIENT_ALIVE_COUNT_MAX, kex=KEX, ciphers=CIPHERS, macs=MACS,
        host_key_algorithms=HOST_KEY_ALGORITHMS, pubkey_algorithms=_pubkey_algorithms(inv))
    return Artifact(SSHD_DROPIN, content, "sshd", service=SSHD_SERVICE)


def _rules(host: Host, ruleset: Ruleset, path: str, kind: str) -> Artifact:
    content = _render("iptables.rules.j2", host=host.name, ruleset=ruleset, path=path)
    return Artifact(path, content, kind, mode=0o640, service=FIREWALL_UNIT)


def _firewall(host: Host, fw: HostFirewall) -> list[Artifact]:
    def entry(rs: Ruleset, path: str) -> dict[str, str]:
        v6 = rs.family == 6
        return {"restore": "ip6tables-restore" if v6 else "iptables-restore",
                "tool": "ip6tables" if v6 else "iptables", "file": os.path.basename(path),
                "hook": rs.hook, "chain": rs.chain}

    script = _render(
        "provision-firewall.sh.j2", host=host.name, rules_dir=RULES_DIR,
        rulesets=[entry(fw.v4, RULES_V4), entry(fw.v6, RULES_V6)],
        docker=[entry(fw.docker_v4, DOCKER_V4), entry(fw.docker_v6, DOCKER_V6)],
        docker_hook=HOOKS[DOCKER_CHAIN])
    unit = _render("provision-firewall.unit.j2", host=host.name, script=FIREWALL_SCRIPT,
                   chains=[INPUT_CHAIN, DOCKER_CHAIN])
    dropin = _render("docker-dropin.conf.j2", host=host.name, script=FIREWALL_SCRIPT,
                     docker_hook=HOOKS[DOCKER_CHAIN])
    return [
        _rules(host, fw.v4, RULES_V4, "iptables-v4"),
        _rules(host, fw.v6, RULES_V6, "iptables-v6"),
        _rules(host, fw.docker_v4, DOCKER_V4, "iptables-docker-v4"),
        _rules(host, fw.docker_v6, DOCKER_V6, "iptables-docker-v6"),
        Artifact(FIREWALL_SCRIPT, script, "firewall-script", mode=0o755, service=FIREWALL_UNIT),
        Artifact(f"{UNIT_DIR}/{FIREWALL_UNIT}", unit, "unit", service=FIREWALL_UNIT),
        Artifact(DOCKER_DROPIN, dropin, "unit-dropin", service="docker.service"),
    ]


def is_jupyter(service: Service) -> bool:
    """Services that get a rendered jupyter_server_config.py."""
    return service.is_jupyter


def jupyter_config_path(service: Service) -> str:
    return f"{JUPYTER_CONFIG_DIR}/{service.name}/jupyter_server_config.py"


_PLACEHOLDER = re.compile(r"\{(bind|port|logdir|notebook_dir|config|user|venv)\}")


def exec_start(host: Host, service: Service) -> str:
    """The service command with its placeholders filled (values are validated, one-line)."""
    if service.command is None:
        raise RenderError(f"host '{host.name}' service '{service.name}': no command to run")
    values: dict[str, Callable[[], str | None]] = {
        "bind": lambda: service.bind,
        "port": lambda: str(service.port),
        "logdir": lambda: service.logdir,
        "notebook_dir": lambda: service.notebook_dir,
        "config": lambda: jupyter_config_path(service) if is_jupyter(service) else None,
        "user": lambda: service.user,
        "venv": lambda: f"{service.venv.rstrip('/')}/bin/" if service.venv else "",
    }

    def fill(m: re.Match[str]) -> str:
        value = values[m.group(1)]()
        if value is None:
            raise RenderError(f"host '{host.name}' service '{service.name}': the command uses "
                              f"{{{m.group(1)}}} but the service has no value for it"
                              + (" (only Jupyter gets a rendered config)" if m.group(1) == "config" else ""))
        return value

    return _PLACEHOLDER.sub(fill, service.command)


def _service(host: Host, service: Service) -> list[Artifact]:
    if service.unit_name == FIREWALL_UNIT:
        raise RenderError(f"host '{host.name}': service name '{service.name}' is reserved "
                          f"({FIREWALL_UNIT} is provision's firewall loader)")
    out = []
    if is_jupyter(service):
        config = _render("jupyter_server_config.py.j2", host=host.name, service=service,
                         notebook_dir=service.notebook_dir)
        out.append(Artifact(jupyter_config_path(service), config, "jupyter-config",
                            service=service.unit_name))
    unit = _render("service.unit.j2", host=host.name, service=service,
                   exec_start=exec_start(host, service),
                   working_directory=service.notebook_dir or "~",
                   environment=[("PYTHONUNBUFFERED", "1")])
    out.append(Artifact(f"{UNIT_DIR}/{service.unit_name}", unit, "unit", service=service.unit_name))
    return out


def host_directories(host: Host) -> tuple[tuple[str, str], ...]:
    """(path, owner) of directories the services need, created by the converge step."""
    dirs = {(s.logdir, s.user) for s in host.services if s.logdir}
    dirs |= {(s.notebook_dir, s.user) for s in host.services if s.notebook_dir}
    return tuple(sorted((p, u) for p, u in dirs if p))


def render_host(inv: Inventory, host: Host, *, allow_lockout: bool = False) -> tuple[Artifact, ...]:
    """Everything that lands on `host` (a bastion or a host), sorted by path.

    Raises RenderError when the firewall would leave no SSH path for the operator
    (`allow_lockout=True` turns that off, for tests).
    """
    fw = host_firewall(inv, host, allow_lockout=allow_lockout)
    artifacts = [_sshd(inv, host), *_firewall(host, fw)]
    for service in host.services:
        artifacts.extend(_service(host, service))
    paths = [a.path for a in artifacts]
    dupes = sorted({p for p in paths if paths.count(p) > 1})
    if dupes:
        raise RenderError(f"host '{host.name}': two artifacts at {', '.join(dupes)}")
    return tuple(sorted(artifacts, key=lambda a: a.path))


def write_tree(inv: Inventory, out_dir: Path, *, allow_lockout: bool = False) -> list[Path]:
    """Write `out_dir/ssh_config` and `out_dir/<node>/<remote path>` for every node.

    Everything is rendered before anything is written, so a RenderError leaves no files.
    Returns the written paths, sorted.
    """
    files: dict[Path, tuple[str, int]] = {out_dir / "ssh_config": (render_ssh_config(inv), 0o600)}
    for node in (*inv.bastions, *inv.hosts):
        for a in render_host(inv, node, allow_lockout=allow_lockout):
            files[out_dir / node.name / a.path.lstrip("/")] = (a.content, a.mode)
    for path, (content, mode) in sorted(files.items()):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        path.chmod(mode)
    return sorted(files)
