"""What lands on a node: the data each template gets, and the artifacts it renders.

Pure: the model in, text out (templates through `provision.render.env`). Output is
deterministic: no timestamps, sorted wherever order carries no meaning.

What lands on a node (bastion or host), see `render_host`:

| kind                 | path                                                     |
|----------------------|----------------------------------------------------------|
| sshd                 | /etc/ssh/sshd_config.d/00-provision.conf                 |
| iptables-v4 / -v6    | /etc/iptables/rules.v4, /etc/iptables/rules.v6           |
| iptables-docker-v4/6 | /etc/iptables/provision-docker.v4, .v6                   |
| firewall-script      | /usr/local/sbin/provision-firewall (loads + hooks chains)|
| unit                 | /etc/systemd/system/provision-firewall.service           |
| unit-dropin          | /etc/systemd/system/docker.service.d/50-provision.conf   |
| unit                 | /etc/systemd/system/provision-<service>.service          |
| unit (per-user)      | provision-<name>@.service + provision-<name>@<member>.service.d/50-provision.conf |
| jupyter-config       | /etc/provision/jupyter/<service>/jupyter_server_config.py|
| apt-source / apt-key | /etc/apt/sources.list.d/provision-<name>.sources, /etc/apt/keyrings/provision-<name>.asc |

Directories a service needs (TensorBoard's logdir, a notebook_dir) are not files: the
converge step creates them from `host_directories`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from provision.errors import RenderError
from provision.firewall.rules import (
    DOCKER_CHAIN,
    HOOKS,
    INPUT_CHAIN,
    HostFirewall,
    Ruleset,
    host_firewall,
)
from provision.inventory.catalog import MEMBER_TOKEN_FILE
from provision.inventory.model import Host, Inventory, Service
from provision.secrets import delivery

from .apt import apt_artifacts
from .artifact import Artifact
from .env import render as _render

# 00-: sshd keeps the first value it reads and reads sshd_config.d in C order, so ours
# comes before cloud-init's 50-cloud-init.conf and 60-cloudimg-settings.conf (docs/hardening.md).
SSHD_DROPIN = "/etc/ssh/sshd_config.d/00-provision.conf"
SSHD_DROPIN_BEFORE = ("/etc/ssh/sshd_config.d/50-provision.conf",)  # its name until issue 20
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
# The options an inventory may set per host or role (`sshd:`, provision.inventory.sshd_options),
# and what a node gets when it sets none. Liveness is ClientAlive* (inside the encrypted
# channel, ~120 s to drop a dead client), not TCPKeepAlive (spoofable, off); MaxSessions 4:
# provision itself holds up to 3 sessions on one connection (the host lock's held probe, the
# apply, the stop of an interrupted run), docs/hardening.md#sshd-options-per-host-and-role.
SSHD_CHOICES = (("X11Forwarding", "no"), ("MaxAuthTries", "3"), ("LoginGraceTime", "30"),
                ("ClientAliveInterval", "60"), ("ClientAliveCountMax", "2"), ("MaxSessions", "4"))
SSHD_LISTS = ("PermitOpen", "AllowUsers", "AllowGroups")  # none unless the inventory says
SSHD_DROPIN_MODE = 0o600  # sshd alone reads it (lynis wants sshd's configuration 0600)


# --- per node ----------------------------------------------------------------------------

def _pubkey_algorithms(inv: Inventory) -> tuple[str, ...]:
    extra = {alg for p in inv.team for key in p.keys
             for alg in _KEY_ALGORITHMS.get(key.split()[0], ())}
    return (*HOST_KEY_ALGORITHMS, *sorted(extra))


def _sshd(inv: Inventory, host: Host) -> Artifact:
    sockets = sorted(s.name for s in host.services if s.socket)
    stream_local = "local" if sockets else "no"
    stream_reason = ("members' own servers listen on Unix sockets: " + ", ".join(sockets)
                     if sockets else "no member's server on a Unix socket")
    chosen = dict(host.sshd)
    if "AllowTcpForwarding" in chosen:
        forwarding, reason = chosen["AllowTcpForwarding"], "the inventory's sshd.AllowTcpForwarding"
    elif host.is_bastion:
        forwarding, reason = "local", "a bastion serves ProxyJump (local forwarding only)"
    elif host.tunnel_services:
        forwarding, reason = "local", "tunnel services: " + ", ".join(
            sorted(s.name for s in host.tunnel_services))
    else:
        forwarding, reason = "no", "no tunnel services and not a bastion"
    choices = [(k, chosen.get(k, v), k in chosen) for k, v in SSHD_CHOICES]
    lists = [(k, chosen[k]) for k in SSHD_LISTS if k in chosen]
    content = _render(
        "sshd_config.conf.j2", host=host.name, allow_tcp_forwarding=forwarding,
        forwarding_reason=reason, allow_stream_local=stream_local,
        stream_local_reason=stream_reason, choices=choices, lists=lists, kex=KEX,
        ciphers=CIPHERS, macs=MACS, host_key_algorithms=HOST_KEY_ALGORITHMS,
        pubkey_algorithms=_pubkey_algorithms(inv))
    return Artifact(SSHD_DROPIN, content, "sshd", mode=SSHD_DROPIN_MODE, service=SSHD_SERVICE)


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
        "config": lambda: jupyter_config_path(service) if service.is_jupyter else None,
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


_TMPS = ("/tmp", "/var/tmp")


def _under_tmp(path: str | None) -> bool:
    return path is not None and any(path == t or path.startswith(t + "/") for t in _TMPS)


def tmp_binds(service: Service) -> tuple[str, ...]:
    """The service's venv when it lies under /tmp or /var/tmp (a checkout cloned there): with
    a /tmp of its own (PrivateTmp) it would vanish (203/EXEC), so it is bound into it,
    read-only. Data directories are never there (the inventory's data roots)."""
    return tuple(p.rstrip("/") for p in (service.venv,) if p is not None and _under_tmp(p))


def dropin_path(service: Service) -> str:
    """A member's server's drop-in: its command, GPUs and memory limit."""
    return f"{UNIT_DIR}/{service.unit_name}.d/50-provision.conf"


def _member_service(host: Host, service: Service) -> list[Artifact]:
    """A member's server: their Jupyter config and the drop-in of their instance."""
    config = _render("jupyter_server_config.py.j2", host=host.name, service=service,
                     notebook_dir=None, token_file=MEMBER_TOKEN_FILE)
    dropin = _render("service-instance.conf.j2", host=host.name, service=service,
                     exec_start=exec_start(host, service), bind_ro=tmp_binds(service))
    return [Artifact(jupyter_config_path(service), config, "jupyter-config",
                     service=service.unit_name),
            Artifact(dropin_path(service), dropin, "unit", service=service.unit_name)]


def _templates(host: Host) -> list[Artifact]:
    """One template unit per per-user service (provision-NAME@.service)."""
    out = {}
    for s in host.services:
        if s.template_unit and s.template_unit not in out:
            unit = _render("service-template.unit.j2", host=host.name, name=s.template,
                           restart=s.restart, private_tmp=s.private_tmp,
                           runtime_dir=s.socket is not None)
            out[s.template_unit] = Artifact(f"{UNIT_DIR}/{s.template_unit}", unit, "unit",
                                            service=s.template_unit)
    return list(out.values())


def _service(host: Host, service: Service) -> list[Artifact]:
    if service.member is not None:
        return _member_service(host, service)
    if service.unit_name == FIREWALL_UNIT:
        raise RenderError(f"host '{host.name}': service name '{service.name}' is reserved "
                          f"({FIREWALL_UNIT} is provision's firewall loader)")
    out = []
    if service.is_jupyter:
        config = _render("jupyter_server_config.py.j2", host=host.name, service=service,
                         notebook_dir=service.notebook_dir)
        out.append(Artifact(jupyter_config_path(service), config, "jupyter-config",
                            service=service.unit_name))
    unit = _render("service.unit.j2", host=host.name, service=service,
                   exec_start=exec_start(host, service), bind_ro=tmp_binds(service),
                   working_directory=service.notebook_dir or "~",
                   environment=[("PYTHONUNBUFFERED", "1"), *service.environment],
                   credentials=delivery.unit_lines(service))
    out.append(Artifact(f"{UNIT_DIR}/{service.unit_name}", unit, "unit", service=service.unit_name))
    # a secret's file, in the rendered tree only as a placeholder (apply delivers the value)
    out += [Artifact(delivery.path(service, use), delivery.placeholder(service, use),
                     "secret-placeholder", mode=delivery.MODE, service=service.unit_name)
            for use in service.secrets]
    return out


def host_directories(host: Host) -> tuple[tuple[str, str], ...]:
    """(path, owner) of directories the services need, created by the converge step."""
    dirs = {(s.logdir, s.user) for s in host.services if s.logdir and not s.group}
    dirs |= {(s.notebook_dir, s.user) for s in host.services if s.notebook_dir}
    return tuple(sorted((p, u) for p, u in dirs if p))


def team_directories(host: Host) -> tuple[tuple[str, str, str], ...]:
    """(path, owner, group) of data directories a team group writes (TensorBoard's logdir):
    mode 2770, so files made there belong to the group and others see nothing."""
    return tuple(sorted({(s.logdir, s.user, s.group) for s in host.services
                         if s.logdir and s.group}))


def render_host(inv: Inventory, host: Host, *, allow_lockout: bool = False) -> tuple[Artifact, ...]:
    """Everything that lands on `host` (a bastion or a host), sorted by path.

    Raises RenderError when the firewall would leave no SSH path for the operator
    (`allow_lockout=True` turns that off, for tests).
    """
    fw = host_firewall(inv, host, allow_lockout=allow_lockout)
    artifacts = [_sshd(inv, host), *_firewall(host, fw)]
    for service in host.services:
        artifacts.extend(_service(host, service))
    artifacts.extend(_templates(host))
    artifacts.extend(apt_artifacts(host))
    paths = [a.path for a in artifacts]
    dupes = sorted({p for p in paths if paths.count(p) > 1})
    if dupes:
        raise RenderError(f"host '{host.name}': two artifacts at {', '.join(dupes)}")
    return tuple(sorted(artifacts, key=lambda a: a.path))
