"""How the OpenSSH backend calls ssh (pure): the argv of the tunnel, of a command through
its master connection, of an interactive login, and a one-line reason from ssh's stderr."""

from __future__ import annotations

from collections.abc import Sequence

from provision.inventory.forwards import LOCAL_BIND, Forward
from provision.ssh.login import Hop
from provision.tunnel.backoff import KEEPALIVE_COUNT


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
