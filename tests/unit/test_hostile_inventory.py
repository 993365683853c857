"""The attacker's corpus: hostile values in a team-shared inventory (issue 10).

Whoever can edit one field of the inventory must gain no more than that field grants, and
`apply` runs what `render` writes as root. Every case here is one hostile value in one
field, named `<class>__<what>`, and asserts one of:

- `refuse`: `provision check -i FILE` exits 2 with a `FILE:LINE:COL: ` message pointing into
  the inventory, no traceback, and no raw control characters in its output;
- `error:CODE` / `warning:CODE`: the value is valid YAML and schema, but `check` must report
  the finding (exit 1 for an error);
- `harmless`: the value is legitimately acceptable, and the rendered bytes
  (`provision render --out DIR`) prove it stays data: quoted, on its own line, no directive
  or argv word added. A clean refusal (exit 2) is accepted there too.

The corpus is generated from the table below (one small inventory per case, written to a
tmp file); the hostile value of each case is visible in the table itself. Parser limits
(class 7), directory-inventory file names (class 1) and the render output layout (class 9)
have their own tests at the end.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from provision.inventory import load_inventory
from provision.inventory.model import Inventory
from tests.support.tools import exec_commands, need_tools, ssh_g

# --- keys ---------------------------------------------------------------------------------------


def _blob(kind: str, body: bytes) -> str:
    raw = len(kind).to_bytes(4, "big") + kind.encode() + len(body).to_bytes(4, "big") + body
    return base64.b64encode(raw).decode()


ED = "ssh-ed25519 " + _blob("ssh-ed25519", bytes(range(32)))
ED2 = "ssh-ed25519 " + _blob("ssh-ed25519", bytes(range(1, 33)))
DSS = "ssh-dss " + _blob("ssh-dss", bytes(64))
RSA_BLOB = _blob("ssh-rsa", bytes(64))

# --- the base inventory every case starts from ------------------------------------------------

BASE: dict[str, Any] = {
    "version": 1,
    "defaults": {"user": "ubuntu"},
    "team": {
        "alice": {"keys": [f"{ED} alice@laptop"], "sudo": True},
        "bob": {"keys": [f"{ED2} bob@desk"]},
    },
    "bastions": {
        "jump": {"address": "192.0.2.10", "allow_ssh_from": ["203.0.113.0/24"],
                 "egress": ["10.0.0.5/32"]},
    },
    "hosts": {
        "gpu1": {
            "address": "10.0.1.21",
            "via": "jump",
            "ssh_from": ["10.0.0.0/24"],
            "services": {
                "web": {"port": 8000, "user": "bob",
                        "command": "/opt/venv/bin/uvicorn app:api --host {bind} --port {port}"},
            },
        },
    },
}

SG = {"region": "us-east-1", "security_groups": {
    "gpu-sg": {"vpc": "vpc-0abc1234", "ingress": [{"port": 22, "from": ["203.0.113.0/24"]}]}}}

DNS = {"resolvers": ["192.0.2.53"], "zones": {"example.org": {
    "provider": "route53", "records": {"api": {"type": "A", "values": ["203.0.113.50"]}}}}}


def inv(*patches: tuple[str, Any]) -> dict[str, Any]:
    """BASE with `("a.b.c", value)` patches applied; value DELETE removes the key."""
    data = copy.deepcopy(BASE)
    for path, value in patches:
        parts = path.split(".")
        node = data
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        if value is DELETE:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value
    return data


DELETE = object()
SVC = "hosts.gpu1.services"


def svc(name: str, **fields: Any) -> tuple[str, Any]:
    return (f"{SVC}.{name}", fields)


def cmd(command: str, **extra: Any) -> tuple[str, Any]:
    return svc("web", port=8000, user="bob", command=command, **extra)


# --- rendered-bytes checkers --------------------------------------------------------------------

Checker = Callable[[Path, Inventory], None]


def unit(out: Path, host: str, service: str) -> str:
    return (out / host / "etc" / "systemd" / "system" / f"provision-{service}.service").read_text()


def execstart_is(argv: list[str], service: str = "web", host: str = "gpu1") -> Checker:
    def check(out: Path, _inv: Inventory) -> None:
        text = unit(out, host, service)
        lines = [ln for ln in text.splitlines() if ln.startswith("ExecStart")]
        assert len(lines) == 1, lines
        assert not text.rstrip("\n").endswith("\\")
        assert not any(ln.endswith("\\") for ln in text.splitlines()), "a line continues the next one"
        value = lines[0].removeprefix("ExecStart=")
        assert "%" not in value.replace("%%", ""), f"unescaped %-specifier in {value!r}"
        try:
            cmds = exec_commands(value)
        except ValueError as e:
            raise AssertionError(f"systemd cannot parse {lines[0]!r}: {e}") from None
        assert cmds == [("", argv)], f"systemd reads {cmds}, declared {argv}"
    return check


def authorized_keys_one_line(out: Path, model: Inventory) -> None:
    from provision.steps.users import authorized_keys

    for p in model.team:
        text = authorized_keys(p.name, p.keys)
        body = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
        assert len(body) == len(p.keys), text
        for ln in body:
            assert ln.split()[0] in ("ssh-ed25519", "ssh-rsa") or ln.split()[0].startswith(
                ("ecdsa-", "sk-")), f"line starts with options: {ln!r}"


def nothing_rendered_contains(needle: str) -> Checker:
    def check(out: Path, _inv: Inventory) -> None:
        for f in out.rglob("*"):
            if f.is_file():
                assert needle not in f.read_text(), f"{needle!r} reached {f}"
    return check


def ssh_port_is(port: int) -> Checker:
    def check(out: Path, _inv: Inventory) -> None:
        cfg = (out / "ssh_config").read_text().splitlines()
        i = cfg.index("Host gpu1")
        assert cfg[i + 3] == f"  Port {port}", cfg[i : i + 4]
    return check


def directory_accepted(path: str) -> Checker:
    def check(out: Path, model: Inventory) -> None:
        from provision.render import host_directories

        assert path in [p for p, _ in host_directories(model.node("gpu1"))]
    return check


# --- the table ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    sink: str  # where the value would land
    expect: str  # refuse | harmless | error:CODE[|CODE] | warning:CODE[|CODE] | ok
    data: dict[str, Any] | None = None
    text: str | None = None  # raw YAML, for what a dict cannot say (tags, duplicates, bytes)
    checker: Checker | None = None
    line: int | None = None  # the line a refusal must point at (raw-text cases)


PREFIXES = {"plus": "+", "bang": "!", "bangbang": "!!", "dash": "-", "at": "@", "colon": ":"}
RESERVED_USERS = ["root", "nobody", "sshd", "daemon", "bin", "sys", "_apt", "systemd-network",
                  "www-data", "messagebus", "systemd-resolve"]
HALVES = ["0.0.0.0/1", "128.0.0.0/1"]
MANY_8S = [f"{i}.0.0.0/8" for i in range(1, 224) if i not in (10, 127)]
ALLOWED_DATA_DIRS = ["/srv/runs", "/data/runs", "/mnt/runs", "/scratch/runs", "/home/bob/runs",
                     "/opt/tb/runs"]
BAD_DATA_DIRS = {
    "etc_systemd_system": "/etc/systemd/system/provision-web.service.d",
    "etc": "/etc/cron.d",
    "etc_sudoers_d": "/etc/sudoers.d",
    "root_home": "/root/runs",
    "usr": "/usr/local/bin",
    "usr_lib_systemd": "/usr/lib/systemd/system",
    "boot": "/boot",
    "slash": "/",
    "var_spool_cron": "/var/spool/cron/crontabs",
    "proc_self_root": "/proc/self/root/etc/sudoers.d",
    "tmp": "/tmp/runs",
    "dev_shm": "/dev/shm/runs",
    "run": "/run/systemd/system",
    "double_slash_etc": "//etc/cron.d",
    "dotdot": "/srv/../etc",
    "trailing_dotdot": "/srv/runs/..",
    "dot_dotdot": "/srv/./../etc/x",
    "srv_prefix_trick": "/srvx/runs",
    "bare_home": "/home",
    "bare_opt": "/opt",
    "other_users_home": "/home/alice/runs",  # the service runs as bob
    "home_dotdot": "/home/bob/../alice",
    "relative": "srv/runs",
    "tilde": "~/runs",
}

JUPYTER_HALVES = svc("jupyter", bind="0.0.0.0", expose={"from": HALVES})

CASES: list[Case] = [
    Case("sanity__base_inventory_is_clean", "-", "ok", inv()),
    # (2) address-like values: IPv6 scope ids carry anything but whitespace -------------------
    Case("address__host_scope_quote", "ssh_config HostName", "refuse",
         inv(("hosts.gpu1.address", 'fe80::1%"x'))),
    Case("address__host_scope_cmdsubst", "ssh_config HostName, ssh argv", "refuse",
         inv(("hosts.gpu1.address", "fe80::1%$(id)"))),
    Case("address__host_scope_backslash", "ssh_config HostName", "refuse",
         inv(("hosts.gpu1.address", "fe80::1%x\\"))),
    Case("address__host_scope_comma", "ssh_config HostName", "refuse",
         inv(("hosts.gpu1.address", "fe80::1%a,b"))),
    Case("address__bastion_scope_quote", "ssh_config HostName of the jump host", "refuse",
         inv(("bastions.jump.address", "fe80::1%'x"))),
    Case("address__host_benign_scope_id", "ssh_config HostName (%-expansion), ip6tables", "refuse",
         inv(("hosts.gpu1.address", "fe80::1%eth0"))),
    Case("address__ssh_from_benign_scope_id", "ip6tables -s (unloadable)", "refuse",
         inv(("hosts.gpu1.ssh_from", ["10.0.0.0/24", "fe80::%eth0/64"]))),
    Case("address__host_dash_option", "ssh argv (-o ProxyCommand)", "refuse",
         inv(("hosts.gpu1.address", "-oProxyCommand=id"))),
    Case("address__bind_scope_backslash", "unit ExecStart continuation", "refuse",
         inv(cmd("/opt/venv/bin/uvicorn app:api --host {bind} --port {port}", bind="fe80::1%x\\"))),
    Case("address__bind_scope_cmdsubst", "tunnel probe bash -c, ExecStart", "refuse",
         inv(svc("jupyter", bind="fe80::1%$(reboot)"))),
    Case("address__bind_scope_specifier", "unit %-specifier expansion", "refuse",
         inv(cmd("/opt/venv/bin/uvicorn app:api --host {bind} --port {port}", bind="fe80::1%h"))),
    Case("address__bind_scope_python_quote", "jupyter_server_config.py, ExecStart", "refuse",
         inv(svc("jupyter", bind="fe80::1%'+__import__('os').system('id')+'"))),
    Case("address__bind_scope_semicolon", "unit ExecStart lone ;", "refuse",
         inv(cmd("/opt/venv/bin/uvicorn app:api --host {bind} --port {port}", bind="fe80::1%;"))),
    Case("address__ssh_from_scope_comma", "ip6tables -s (two sources)", "refuse",
         inv(("hosts.gpu1.ssh_from", ["10.0.0.0/24", "fe80::%a,fe80::/10"]))),
    Case("address__allow_ssh_from_scope_comma", "bastion ip6tables -s", "refuse",
         inv(("bastions.jump.allow_ssh_from", ["203.0.113.0/24", "fe80::%x,2000::/128"]))),
    Case("address__egress_scope_comma", "hosts' ip6tables -s", "refuse",
         inv(("bastions.jump.egress", ["10.0.0.5/32", "fe80::%a,fe80::/10"]))),
    Case("address__expose_from_scope_cmdsubst", "ip6tables -s, check output", "refuse",
         inv(cmd("/opt/venv/bin/uvicorn app:api --host {bind} --port {port}", bind="0.0.0.0",
                 expose={"from": ["fe80::%$(id)/64"]}))),
    Case("address__sg_ingress_scope_comma", "AWS rule source", "refuse",
         inv(("aws", {"region": "us-east-1", "security_groups": {"gpu-sg": {
             "vpc": "vpc-0abc1234", "ingress": [{"port": 22, "from": ["fe80::%x,::/10"]}]}}}))),
    Case("address__sg_egress_scope_quote", "AWS rule destination", "refuse",
         inv(("aws", {"region": "us-east-1", "security_groups": {"gpu-sg": {
             "vpc": "vpc-0abc1234", "egress": [{"port": 443, "to": ["fe80::%'x/64"]}]}}}))),
    Case("address__dns_resolver_scope_cmdsubst", "dig @resolver", "refuse",
         inv(("dns", {**DNS, "resolvers": ["fe80::53%$(id)"]}))),
    Case("address__dns_aaaa_scope", "DNS record value", "refuse",
         inv(("dns", {"zones": {"example.org": {"provider": "route53", "records": {
             "api": {"type": "AAAA", "values": ["fe80::1%x;rm"]}}}}}))),
    Case("address__dns_rfc2136_server_scope", "nsupdate server line", "refuse",
         inv(("dns", {"zones": {"example.org": {"provider": "rfc2136", "server": "fe80::53%`id`",
                                                "tsig_key_file": "/etc/tsig.key"}}}))),
    Case("address__dns_cname_value_scope", "DNS record value", "refuse",
         inv(("dns", {"zones": {"example.org": {"provider": "route53", "records": {
             "www": {"type": "CNAME", "value": "fe80::1%x"}}}}}))),
    # (3) systemd command prefixes and unit-file tricks ----------------------------------------
    *[Case(f"systemd__command_prefix_{n}", "unit ExecStart prefix (privileges)", "refuse",
           inv(cmd(f"{p}/usr/bin/python3 -m http.server --bind {{bind}} {{port}}")))
      for n, p in PREFIXES.items()],
    Case("systemd__command_prefix_after_empty_venv", "unit ExecStart prefix", "refuse",
         inv(cmd("{venv}+/usr/bin/python3 -m http.server --bind {bind} {port}"))),
    Case("systemd__command_lone_semicolon", "unit ExecStart (second command line)",
         "harmless", inv(cmd("/usr/bin/python3 -m http.server {port} ; /bin/rm -rf /")),
         checker=execstart_is(["/usr/bin/python3", "-m", "http.server", "8000", ";", "/bin/rm",
                               "-rf", "/"])),
    Case("systemd__command_quotes_change_argv", "unit ExecStart argv", "harmless",
         inv(cmd("/usr/bin/python3 -c \"import http.server\" --port {port}")),
         checker=execstart_is(["/usr/bin/python3", "-c", "import http.server", "--port", "8000"])),
    Case("systemd__command_unbalanced_quote", "unit ExecStart (unparseable)", "harmless",
         inv(cmd("/usr/bin/python3 -m http.server '{port}")),
         checker=execstart_is(["/usr/bin/python3", "-m", "http.server", "'8000"])),
    Case("systemd__command_percent_specifier", "unit %-specifier", "refuse",
         inv(cmd("/usr/bin/env %n --port {port}"))),
    Case("systemd__command_dollar_var", "unit $VAR expansion", "refuse",
         inv(cmd("/usr/bin/env $HOME --port {port}"))),
    Case("systemd__command_trailing_backslash", "unit line continuation", "refuse",
         inv(cmd("/usr/bin/env --port {port} \\"))),
    Case("systemd__command_escaped_semicolon", "unit ExecStart escapes", "refuse",
         inv(cmd("/usr/bin/env \\; --port {port}"))),
    Case("systemd__command_c1_csi", "unit file, plan diff on a terminal", "refuse",
         inv(cmd("/usr/bin/env \x9b2J --port {port}"))),
    Case("systemd__command_nel", "unit file line structure (NEL)", "refuse",
         inv(cmd("/usr/bin/env a\x85ExecStartPre=/bin/id --port {port}"))),
    Case("systemd__command_line_separator", "unit file line structure (U+2028)", "refuse",
         inv(cmd("/usr/bin/env a\u2028User=root --port {port}"))),
    Case("systemd__command_bidi_override", "unit file as reviewed (U+202E)", "refuse",
         inv(cmd("/usr/bin/env \u202e;di/nib/ --port {port}"))),
    Case("systemd__command_esc", "unit file, plan diff on a terminal", "refuse",
         inv(cmd("/usr/bin/env \x1b[2J --port {port}"))),
    Case("systemd__command_unknown_placeholder", "unit ExecStart", "refuse",
         inv(cmd("/usr/bin/env {secret} --port {port}"))),
    # (4) data directories created and chowned for the service user ---------------------------
    *[Case(f"paths__logdir_{n}", "mkdir + chown for the service user", "refuse",
           inv(svc("tensorboard", logdir=p, user="bob"))) for n, p in BAD_DATA_DIRS.items()],
    *[Case(f"paths__notebook_dir_{n}", "mkdir + chown, WorkingDirectory=", "refuse",
           inv(svc("jupyter", notebook_dir=p, user="bob")))
      for n, p in BAD_DATA_DIRS.items()
      if n in ("etc_systemd_system", "root_home", "usr", "slash", "other_users_home", "boot",
               "srv_prefix_trick", "double_slash_etc", "proc_self_root")],
    *[Case(f"paths__logdir_accepted_{p.strip('/').replace('/', '_')}", "mkdir + chown",
           "harmless", inv(svc("tensorboard", logdir=p, user="bob")),
           checker=directory_accepted(p)) for p in ALLOWED_DATA_DIRS],
    Case("paths__venv_dotdot", "ExecStart program path", "refuse",
         inv(svc("jupyter", venv="/opt/venv/../../usr/local"))),
    Case("paths__venv_relative", "ExecStart program path", "refuse",
         inv(svc("jupyter", venv="opt/venv"))),
    Case("paths__team_shell_relative", "useradd -s", "refuse",
         inv(("team.bob.shell", "bash"))),
    # (5) team members named like system or existing accounts ----------------------------------
    *[Case(f"team__reserved_{u}", "authorized_keys, usermod of a system account", "refuse",
           inv((f"team.{u}", {"keys": [f"{ED2} x@y"]}))) for u in RESERVED_USERS],
    Case("team__login_user_defaults", "the operator's own authorized_keys", "refuse",
         inv(("team.ubuntu", {"keys": [f"{ED2} x@y"]}))),
    Case("team__login_user_of_host", "the operator's own authorized_keys on gpu1", "refuse",
         inv(("hosts.gpu1.user", "admin"), ("team.admin", {"keys": [f"{ED2} x@y"]}))),
    Case("team__login_user_of_bastion", "the operator's own authorized_keys on jump", "refuse",
         inv(("bastions.jump.user", "ops"), ("team.ops", {"keys": [f"{ED2} x@y"]}))),
    # (6) whole-internet exposure in disguise --------------------------------------------------
    Case("exposure__jupyter_two_halves", "host firewall", "error:code-exec-public",
         inv(JUPYTER_HALVES)),
    Case("exposure__jupyter_0_0_0_0_slash_1", "host firewall", "error:code-exec-public",
         inv(svc("jupyter", bind="0.0.0.0", expose={"from": ["0.0.0.0/1"]}))),
    Case("exposure__jupyter_2000_slash_3", "host firewall v6", "error:code-exec-public",
         inv(svc("jupyter", bind="::", expose={"from": ["2000::/3"]}))),
    Case("exposure__tensorboard_many_slash8", "host firewall", "error:code-exec-public",
         inv(svc("tensorboard", bind="0.0.0.0", expose={"from": MANY_8S}))),
    Case("exposure__jupyter_named_notebook", "host firewall", "error:code-exec-public",
         inv(svc("notebook", port=8890, bind="0.0.0.0", expose={"from": ["0.0.0.0/0"]},
                 command="{venv}jupyter lab --ServerApp.ip={bind} --port {port}"))),
    Case("exposure__python_m_tensorboard", "host firewall", "error:code-exec-public",
         inv(svc("viz", port=6007, bind="0.0.0.0", expose={"from": HALVES},
                 command="/opt/venv/bin/python -m tensorboard.main --logdir /srv/runs "
                         "--host {bind} --port {port}"))),
    Case("exposure__python_m_notebook", "host firewall", "error:code-exec-public",
         inv(svc("nb", port=8891, bind="::", expose={"from": ["2000::/3"]},
                 command="/opt/venv/bin/python3 -m notebook --ip {bind} --port {port}"))),
    # quotes are refused in commands (systemd groups quoted words: the argv would differ
    # from what the inventory shows), so Jupyter hidden in `sh -c '...'` never gets in
    Case("exposure__jupyter_behind_sh_c", "unit ExecStart quoting", "refuse",
         inv(svc("nb", port=8892, bind="0.0.0.0", expose={"from": ["0.0.0.0/0"]},
                 command="/bin/sh -c 'exec jupyter lab --ip {bind} --port {port}'"))),
    Case("exposure__jupyter_quoted_in_sh_c", "unit ExecStart quoting", "refuse",
         inv(svc("nb", port=8894, bind="0.0.0.0", expose={"from": ["0.0.0.0/0"]},
                 command="/bin/sh -c 'jupyter lab --ip {bind} --port {port}'"))),
    Case("exposure__jupyter_behind_env", "host firewall", "error:code-exec-public",
         inv(svc("nb", port=8893, bind="0.0.0.0", expose={"from": HALVES},
                 command="/usr/bin/env jupyter-lab --ip {bind} --port {port}"))),
    Case("exposure__ssh_from_two_halves", "host firewall ssh", "warning:ssh-open-to-world",
         inv(("hosts.gpu1.ssh_from", HALVES))),
    Case("exposure__allow_ssh_from_2000_slash_3", "bastion firewall ssh",
         "warning:ssh-open-to-world",
         inv(("bastions.jump.allow_ssh_from", ["203.0.113.0/24", "2000::/3"]))),
    Case("exposure__sg_jupyter_two_halves", "security group", "error:sg-code-exec-public",
         inv(("aws", {"region": "us-east-1", "security_groups": {"gpu-sg": {
             "vpc": "vpc-0abc1234", "ingress": [{"port": 8888, "from": HALVES}]}}}))),
    Case("exposure__sg_all_protocols_two_halves", "security group", "error:sg-code-exec-public",
         inv(("aws", {"region": "us-east-1", "security_groups": {"gpu-sg": {
             "vpc": "vpc-0abc1234", "ingress": [{"protocol": "all", "from": HALVES}]}}}))),
    Case("exposure__sg_all_ports_2000_slash_3", "security group", "error:sg-code-exec-public",
         inv(("aws", {"region": "us-east-1", "security_groups": {"gpu-sg": {
             "vpc": "vpc-0abc1234", "ingress": [{"ports": [1, 65535], "from": ["2000::/3"]}]}}}))),
    Case("exposure__sg_tensorboard_many_slash8", "security group", "error:sg-code-exec-public",
         inv(("aws", {"region": "us-east-1", "security_groups": {"gpu-sg": {
             "vpc": "vpc-0abc1234", "ingress": [{"port": 6006, "from": MANY_8S}]}}}))),
    Case("exposure__sg_custom_jupyter_port_halves", "security group", "error:sg-code-exec-public",
         inv(("aws", {"region": "us-east-1", "security_groups": {"gpu-sg": {
             "vpc": "vpc-0abc1234", "ingress": [{"port": 8890, "from": HALVES},
                                                {"port": 22, "from": ["203.0.113.0/24"]}]}}}),
             ("hosts.gpu1.security_groups", ["gpu-sg"]),
             svc("notebook", port=8890, command="/usr/bin/env jupyter lab --port {port}"))),
    Case("exposure__sg_ssh_two_halves", "security group", "warning:sg-ssh-open-to-world",
         inv(("aws", {"region": "us-east-1", "security_groups": {"gpu-sg": {
             "vpc": "vpc-0abc1234", "ingress": [{"port": 22, "from": HALVES}]}}}))),
    # issue 36: plain HTTP to the world is an error now, unless the inventory says why
    Case("exposure__public_plain_http_model_api", "host firewall", "error:plain-http-public",
         inv(cmd("/opt/venv/bin/uvicorn app:api --host {bind} --port {port}", bind="0.0.0.0",
                 expose={"from": ["0.0.0.0/0", "::/0"]}))),
    Case("exposure__public_plain_http_with_a_reason_is_legit", "host firewall", "ok",
         inv(cmd("/opt/venv/bin/uvicorn app:api --host {bind} --port {port}", bind="0.0.0.0",
                 expose={"from": ["0.0.0.0/0", "::/0"]},
                 plain_http="a public mirror of open data, nothing secret"))),
    # (8) control characters and escape sequences in keys and values ---------------------------
    Case("control__ansi_host_name_key", "error message on a terminal", "refuse",
         inv(("hosts.\x1b[2J\x1b[32mok", {"address": "10.0.0.9", "ssh_from": ["10.0.0.0/8"]}))),
    Case("control__ansi_top_level_key", "did-you-mean message", "refuse",
         inv(("\x1b[2J\x1b[1Aversion", 1))),
    Case("control__osc_title_in_address", "error message on a terminal", "refuse",
         inv(("hosts.gpu1.address", "\x1b]0;pwned\x07"))),
    Case("control__bel_in_team_key", "error message on a terminal", "refuse",
         inv(("team.bob\x07", {"keys": [f"{ED2} x@y"]}))),
    Case("control__cr_in_service_key", "error message on a terminal (overwrite)", "refuse",
         inv((f"{SVC}.web\rok", {"port": 8001, "command": "/bin/true"}))),
    Case("control__c1_csi_in_host_key", "error message on a terminal", "refuse",
         inv(("hosts.\x9b2J", {"address": "10.0.0.9"}))),
    Case("control__bidi_in_host_key", "error message as read", "refuse",
         inv(("hosts.gpu\u202e1", {"address": "10.0.0.9"}))),
    Case("control__ansi_in_cidr", "error message on a terminal", "refuse",
         inv(("hosts.gpu1.ssh_from", ["\x1b[31m10.0.0.0/8"]))),
    Case("control__ansi_in_key_comment", "authorized_keys, error message", "refuse",
         inv(("team.bob.keys", [f"{ED2} bob\x1b[2J@desk"]))),
    Case("control__ansi_in_unknown_key_value", "error message on a terminal", "refuse",
         inv(("defaults.usr", "\x1b[2Jroot"))),
    # other fields that reach a sink -----------------------------------------------------------
    Case("keys__option_command", "authorized_keys options", "refuse",
         inv(("team.bob.keys", [f'command="/bin/sh" {ED2} bob@desk']))),
    Case("keys__option_from", "authorized_keys options", "refuse",
         inv(("team.bob.keys", [f'from="*",no-pty {ED2} bob@desk']))),
    Case("keys__option_restrict_environment", "authorized_keys options", "refuse",
         inv(("team.bob.keys", [f'environment="LD_PRELOAD=/tmp/x.so" {ED2}']))),
    Case("keys__ssh_dss", "authorized_keys key type", "refuse",
         inv(("team.bob.keys", [f"{DSS} bob@old"]))),
    Case("keys__type_mismatch", "authorized_keys key type", "refuse",
         inv(("team.bob.keys", [f"ssh-ed25519 {RSA_BLOB} bob@desk"]))),
    Case("keys__comment_line_separator", "authorized_keys lines", "refuse",
         inv(("team.bob.keys", [f"{ED2} bob\u2028ssh-rsa {RSA_BLOB}"]))),
    Case("keys__two_keys_one_line", "authorized_keys lines", "harmless",
         inv(("team.bob.keys", [f"{ED2} bob {ED} second"])), checker=authorized_keys_one_line),
    Case("names__cyrillic_lookalike_host", "ssh_config Host pattern", "refuse",
         inv(("hosts.gрu1", {"address": "10.0.0.9", "ssh_from": ["10.0.0.0/8"]}))),
    Case("names__host_wildcard", "ssh_config Host pattern", "refuse",
         inv(("hosts.*", {"address": "10.0.0.9", "ssh_from": ["10.0.0.0/8"]}))),
    Case("names__host_negated_pattern", "ssh_config Host pattern", "refuse",
         inv(("hosts.!gpu1", {"address": "10.0.0.9", "ssh_from": ["10.0.0.0/8"]}))),
    Case("names__host_64_chars", "file name, Host pattern", "refuse",
         inv(("hosts." + "a" * 64, {"address": "10.0.0.9", "ssh_from": ["10.0.0.0/8"]}))),
    Case("names__address_label_64", "ssh_config HostName", "refuse",
         inv(("hosts.gpu1.address", "a" * 64 + ".example.org"))),
    Case("names__address_300_chars", "ssh_config HostName", "refuse",
         inv(("hosts.gpu1.address", ".".join(["a" * 60] * 5)))),
    Case("names__user_dash_option", "ssh -l, ssh_config User", "refuse",
         inv(("defaults.user", "-oProxyCommand=id"))),
    Case("names__service_firewall_in_role", "provision-firewall.service", "refuse",
         inv(("roles.r", {"services": {"firewall": {"port": 9999, "command": "/bin/true"}}}),
             ("hosts.gpu1.roles", ["r"]))),
    # selector words as names: `exec all` / `hosts: bastions` would mean two things (issue 34)
    Case("names__host_named_all", "host selection (exec, apply, playbooks)", "refuse",
         inv(("hosts.all", {"address": "10.0.0.9", "ssh_from": ["10.0.0.0/8"]}))),
    Case("names__host_named_all_upper", "host selection as read", "refuse",
         inv(("hosts.ALL", {"address": "10.0.0.9", "ssh_from": ["10.0.0.0/8"]}))),
    Case("names__host_named_bastions", "host selection", "refuse",
         inv(("hosts.bastions", {"address": "10.0.0.9", "ssh_from": ["10.0.0.0/8"]}))),
    Case("names__bastion_named_all", "host selection", "refuse",
         inv(("bastions.all", {"address": "192.0.2.11", "allow_ssh_from": ["203.0.113.0/24"]}))),
    Case("names__bastion_named_bastions", "host selection", "refuse",
         inv(("bastions.bastions", {"address": "192.0.2.11",
                                    "allow_ssh_from": ["203.0.113.0/24"]}))),
    Case("names__role_named_all", "host selection role:all", "refuse",
         inv(("roles.all", {"packages": ["htop"]}), ("hosts.gpu1.roles", ["all"]))),
    Case("names__role_named_bastions", "host selection role:bastions", "refuse",
         inv(("roles.bastions", {"packages": ["htop"]}))),
    Case("names__host_role_prefix", "host selection role:NAME", "refuse",
         inv(("hosts.role:gpu", {"address": "10.0.0.9", "ssh_from": ["10.0.0.0/8"]}))),
    Case("names__bastion_also_host", "ssh_config Host", "refuse",
         inv(("hosts.jump", {"address": "10.0.0.9", "ssh_from": ["10.0.0.0/8"]}))),
    Case("jump__self_loop", "ProxyJump", "refuse", inv(("bastions.jump.via", "jump"))),
    Case("jump__three_cycle", "ProxyJump", "refuse", inv(
        ("bastions.a", {"address": "192.0.2.1", "via": "b", "allow_ssh_from": ["203.0.113.0/24"]}),
        ("bastions.b", {"address": "192.0.2.2", "via": "c", "allow_ssh_from": ["203.0.113.0/24"]}),
        ("bastions.c", {"address": "192.0.2.3", "via": "a", "allow_ssh_from": ["203.0.113.0/24"]}))),
    Case("jump__via_a_host", "ProxyJump", "refuse", inv(
        ("hosts.gpu2", {"address": "10.0.1.22", "via": "gpu1", "ssh_from": ["10.0.0.0/24"]}))),
    Case("packages__dpkg_option", "apt-get install argv", "refuse",
         inv(("hosts.gpu1.packages", ["-oDpkg::Pre-Invoke::=id"]))),
    Case("packages__semicolon", "apt-get install (shell)", "refuse",
         inv(("hosts.gpu1.packages", ["foo;rm"]))),
    Case("packages__cmdsubst", "apt-get install (shell)", "refuse",
         inv(("hosts.gpu1.packages", ["$(id)"]))),
    Case("ports__nan", "ssh_config Port", "refuse", inv(("hosts.gpu1.port", float("nan")))),
    Case("ports__inf", "ssh_config Port", "refuse", inv(("hosts.gpu1.port", float("inf")))),
    Case("ports__bool", "ssh_config Port", "refuse", inv(("hosts.gpu1.port", True))),
    Case("ports__float", "ssh_config Port", "refuse", inv(("hosts.gpu1.port", 22.0))),
    Case("ports__negative", "ssh_config Port", "refuse", inv(("hosts.gpu1.port", -22))),
    Case("ports__huge", "ssh_config Port", "refuse", inv(("hosts.gpu1.port", 2**64))),
    Case("ports__hex_literal", "ssh_config Port", "harmless",
         text=yaml.safe_dump(inv()).replace("address: 10.0.1.21", "address: 10.0.1.21\n    port: 0x16"),
         checker=ssh_port_is(22)),
    Case("dns__ttl_huge", "DNS TTL", "refuse", inv(("dns", {"zones": {"example.org": {
        "provider": "route53", "records": {"a": {"type": "A", "values": ["192.0.2.1"], "ttl": 2**63}}}}}))),
    Case("dns__ttl_negative", "DNS TTL", "refuse", inv(("dns", {"zones": {"example.org": {
        "provider": "route53", "records": {"a": {"type": "A", "values": ["192.0.2.1"], "ttl": -1}}}}}))),
    Case("dns__cname_apex", "DNS zone apex", "refuse", inv(("dns", {"zones": {"example.org": {
        "provider": "route53", "records": {"@": {"type": "CNAME", "value": "lb.example.net"}}}}}))),
    Case("dns__record_name_injection", "DNS record name", "refuse", inv(("dns", {"zones": {
        "example.org": {"provider": "route53", "records": {"a;b": {"type": "A", "values": ["192.0.2.1"]}}}}}))),
    Case("urls__endpoint_with_credentials", "boto3 endpoint", "refuse",
         inv(("aws", {**SG, "endpoint_url": "http://user:secret@127.0.0.1:5000"}))),
    Case("urls__endpoint_file_scheme", "boto3 endpoint", "refuse",
         inv(("aws", {**SG, "endpoint_url": "file:///etc/passwd"}))),
    Case("urls__endpoint_header_injection", "boto3 endpoint", "refuse",
         inv(("aws", {**SG, "endpoint_url": "http://127.0.0.1:5000/\r\nX-Evil: 1"}))),
    Case("urls__clouddns_endpoint_gopher", "clouddns endpoint", "refuse",
         inv(("dns", {"zones": {"example.org": {"provider": "clouddns", "project": "my-project",
                                                "managed_zone": "zone", "endpoint": "gopher://x"}}}))),
    # one EC2 instance claimed by two machines (issue 34, class 4): each machine's
    # attachment was planned alone, the second undoing the first
    Case("aws__instance_id_claimed_twice", "sg apply attachment", "refuse",
         inv(("aws", SG), ("hosts.gpu1.security_groups", ["gpu-sg"]),
             ("hosts.gpu1.aws", {"instance_id": "i-0123abcd"}),
             ("bastions.jump.security_groups", ["gpu-sg"]),
             ("bastions.jump.aws", {"instance_id": "i-0123abcd"}))),
    Case("aws__address_claimed_twice", "sg apply attachment (found by address)", "refuse",
         inv(("aws", SG), ("hosts.gpu1.security_groups", ["gpu-sg"]), ("hosts.gpu1.aws", {}),
             ("hosts.gpu2", {"address": "10.0.1.22", "via": "jump", "ssh_from": ["10.0.0.0/24"],
                             "security_groups": ["gpu-sg"],
                             "aws": {"private_address": "10.0.1.21"}}))),
    Case("aws__address_claimed_twice_one_vpc_unknown", "sg apply attachment", "refuse",
         inv(("aws", {**SG, "security_groups": {**SG["security_groups"],
                                                "old": {"id": "sg-0123abcd"}}}),
             ("hosts.gpu1.security_groups", ["gpu-sg"]), ("hosts.gpu1.aws", {}),
             ("hosts.gpu2", {"address": "10.0.1.21", "via": "jump", "ssh_from": ["10.0.0.0/24"],
                             "security_groups": ["old"], "aws": {}}))),
    Case("aws__same_address_in_two_vpcs", "sg apply attachment (two VPCs)", "ok",
         inv(("aws", {**SG, "security_groups": {**SG["security_groups"], "other-sg": {
             "vpc": "vpc-0abc9999", "ingress": [{"port": 22, "from": ["203.0.113.0/24"]}]}}}),
             ("hosts.gpu1.security_groups", ["gpu-sg"]), ("hosts.gpu1.aws", {}),
             ("hosts.gpu2", {"address": "10.0.1.21", "via": "jump", "ssh_from": ["10.0.0.0/24"],
                             "security_groups": ["other-sg"], "aws": {}}))),
    Case("sg__description_shell_metachars", "AWS API only (never a shell or file)", "harmless",
         inv(("aws", {"region": "us-east-1", "security_groups": {"gpu-sg": {
             "vpc": "vpc-0abc1234", "description": "$(id); rm -rf / #",
             "ingress": [{"port": 22, "from": ["203.0.113.0/24"],
                          "description": "office; $(touch /tmp/p) {x}"}]}}})),
         checker=nothing_rendered_contains("$(")),
    Case("sg__description_newline", "AWS description", "refuse",
         inv(("aws", {"region": "us-east-1", "security_groups": {"gpu-sg": {
             "vpc": "vpc-0abc1234", "description": "a\nb", "ingress": []}}}))),
    Case("paths__identity_file_percent_token", "ssh_config IdentityFile %-tokens", "refuse",
         inv(("defaults.identity_file", "~/.ssh/%u"))),
    Case("paths__identity_file_quote", "ssh_config IdentityFile", "refuse",
         inv(("defaults.identity_file", '~/.ssh/"x'))),
    Case("paths__known_hosts_dollar", "ssh_config UserKnownHostsFile", "refuse",
         inv(("defaults.known_hosts", "${HOME}/kh"))),
    Case("team__sudo_string", "sudoers", "refuse", inv(("team.bob.sudo", "yes"))),
    # YAML features ----------------------------------------------------------------------------
    Case("yaml__tag_python", "loader", "refuse",
         text="version: 1\nhosts:\n  gpu1: !!python/object/apply:os.system ['id']\n", line=3),
    Case("yaml__tag_binary", "loader", "refuse",
         text="version: 1\nhosts:\n  gpu1:\n    address: !!binary MTAuMC4wLjE=\n", line=4),
    Case("yaml__tag_custom", "loader", "refuse",
         text="version: 1\nhosts:\n  gpu1:\n    address: !shell id\n", line=4),
    Case("yaml__tag_timestamp", "loader", "refuse",
         text="version: 1\ndefaults:\n  user: !!timestamp 2001-12-14\n", line=3),
    Case("yaml__tag_set", "loader", "refuse",
         text="version: 1\nhosts:\n  gpu1:\n    ssh_from: !!set {10.0.0.0/8: null}\n", line=4),
    Case("yaml__merge_key", "loader", "refuse",
         text="version: 1\nbase: &b {address: 10.0.0.1}\nhosts:\n  gpu1:\n    <<: *b\n", line=5),
    Case("yaml__duplicate_host", "loader", "refuse",
         text="version: 1\nhosts:\n  gpu1: {address: 10.0.0.1, ssh_from: [10.0.0.0/8]}\n"
              "  gpu1: {address: 10.0.0.2, ssh_from: [10.0.0.0/8]}\n", line=4),
    Case("yaml__duplicate_nested_key", "loader", "refuse",
         text="version: 1\nhosts:\n  gpu1:\n    address: 10.0.0.1\n    address: 10.6.6.6\n"
              "    ssh_from: [10.0.0.0/8]\n", line=5),
    Case("yaml__non_string_key", "loader", "refuse",
         text="version: 1\nhosts:\n  1: {address: 10.0.0.1}\n", line=3),
    Case("yaml__raw_escape_byte", "loader message on a terminal", "refuse",
         text="version: 1\nhosts: \x1b[2J\x1b[32mok\n", line=2),
    Case("yaml__two_documents", "loader", "refuse",
         text="version: 1\n---\nversion: 1\nhosts: {}\n", line=3),
]

IDS = [c.name for c in CASES]
assert len(set(IDS)) == len(IDS), "case names must be unique"


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 70


# --- running the CLI ----------------------------------------------------------------------------

# C0 controls except \n, DEL, C1 controls, and the bidi/format characters that reorder text.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


SGR = re.compile(r"\x1b\[[0-9;]*m")


def write_case(case: Case, tmp_path: Path) -> Path:
    path = tmp_path / "inventory.yml"
    if case.text is not None:
        path.write_text(case.text, encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(case.data, sort_keys=False, allow_unicode=True,
                                       width=10_000), encoding="utf-8")
    return path


def cli(*args: str) -> Any:
    # color=True: click.echo would otherwise strip ANSI sequences because the runner is not
    # a terminal, hiding exactly what a terminal would receive.
    return CliRunner().invoke(main, list(args), color=True)


def assert_clean_refusal(result: Any, path: Path, what: str) -> None:
    out = result.stdout + result.stderr
    assert result.exit_code == 2, f"{what}: exit {result.exit_code}, expected 2 (refused)\n{out[-1500:]}"
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        f"{what}: crashed with {result.exception!r}"
    assert "Traceback" not in out
    assert re.search(rf"^{re.escape(str(path))}:\d+:\d+: ", result.stderr, re.M), \
        f"{what}: no '{path}:LINE:COL: ' prefix in:\n{result.stderr[-1500:]}"
    assert_no_raw_controls(out)


def assert_no_raw_controls(out: str) -> None:
    """No control character reaches the terminal raw, apart from provision's own colours
    (SGR sequences ESC [ ... m). Every hostile payload here carries something else too
    (ESC [2J, ESC ], BEL, CR, C1, U+202E), so allowing SGR hides none of them."""
    bad = RAW_CONTROL.search(SGR.sub("", out))
    assert not bad, f"raw control character {bad.group()!r} in the output: {out[-800:]!r}"


def findings_of(path: Path) -> tuple[int, list[dict[str, Any]], Any]:
    r = cli("check", "-i", str(path), "--json")
    if r.exit_code == 2:
        return 2, [], r
    return r.exit_code, json.loads(r.stdout)["findings"], r


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_hostile_case(case: Case, tmp_path: Path) -> None:
    path = write_case(case, tmp_path)
    kind, _, codes = case.expect.partition(":")
    if kind == "refuse":
        result = cli("check", "-i", str(path))
        assert_clean_refusal(result, path, f"{case.name} ({case.sink})")
        if case.line is not None:
            assert re.search(rf"^{re.escape(str(path))}:{case.line}:\d+: ", result.stderr, re.M), \
                f"expected line {case.line}: {result.stderr}"
    elif kind in ("error", "warning", "ok"):
        status, found, r = findings_of(path)
        assert status != 2, f"valid inventory refused:\n{r.stderr}"
        assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
        assert_no_raw_controls(r.stdout + r.stderr)
        summary = [(f["severity"], f["code"]) for f in found]
        if kind == "ok":
            assert status == 0 and not any(s == "error" for s, _ in summary), summary
            return
        wanted = set(codes.split("|"))
        severities = ("error",) if kind == "error" else ("error", "warning")
        hits = [f for f in found if f["code"] in wanted and f["severity"] in severities]
        assert hits, f"check found no {kind} {sorted(wanted)}; findings: {summary} (exit {status})"
        if kind == "error":
            assert status == 1, f"exit {status} with an error finding"
    elif kind == "harmless":
        result = cli("check", "-i", str(path))
        if result.exit_code == 2:
            assert_clean_refusal(result, path, case.name)
            return
        out = tmp_path / "out"
        r = cli("render", "-i", str(path), "--out", str(out))
        if r.exit_code == 2:  # refused at render time: cleanly, and nothing written
            assert "Traceback" not in r.stdout + r.stderr
            assert not out.exists() or not any(out.iterdir())
            return
        assert r.exit_code == 0, f"render exit {r.exit_code}: {r.stderr} {r.exception!r}"
        assert case.checker is not None
        case.checker(out, load_inventory(path))
    else:  # pragma: no cover - a typo in the table
        raise AssertionError(case.expect)


# --- (1) names from outside the schema: the inventory's own file names --------------------------

FILE_NAMES = {
    "newline_proxycommand": "a\nProxyCommand sh -c id #.yml",
    "newline_host_star": "a\nHost *\n  ProxyCommand id\n#.yml",
    "cr_match_all": "a\rMatch all\rProxyCommand id.yml",
    "ansi_escape": "\x1b[2J\x1b[32mok.yml",
    "bidi_override": "inv\u202elmy.x.yml",
    "tab_option": "a\tProxyCommand\tid.yml",
}


def _dir_inventory(fname: str, tmp_path: Path) -> Path:
    d = tmp_path / "inv"
    d.mkdir()
    (d / "main.yml").write_text(yaml.safe_dump(inv()), encoding="utf-8")
    (d / fname).write_text("version: 1\n", encoding="utf-8")
    return d


def _refused_cleanly(result: Any, d: Path) -> bool:
    """Refusing such a file name is fine, if clean and escaped."""
    if result.exit_code != 2:
        return False
    assert "Traceback" not in result.stdout + result.stderr
    assert re.search(rf"^{re.escape(str(d))}/\S*:\d+:\d+: ", result.stderr, re.M), result.stderr
    assert_no_raw_controls(result.stdout + result.stderr)
    return True


@pytest.mark.parametrize("fname", list(FILE_NAMES.values()), ids=list(FILE_NAMES))
def test_directory_inventory_file_names_stay_out_of_ssh_config(fname: str, tmp_path: Path) -> None:
    """names: a file name of a directory inventory must not add ssh directives (header)."""
    d = _dir_inventory(fname, tmp_path)
    if _refused_cleanly(cli("check", "-i", str(d)), d):
        return
    out = tmp_path / "out"
    r = cli("render", "-i", str(d), "--out", str(out))
    if _refused_cleanly(r, d):
        return
    assert r.exit_code == 0, r.stderr
    text = (out / "ssh_config").read_text()
    header = text.split("\nHost ", 1)[0]
    for line in header.split("\n"):  # ssh splits lines at \n only
        assert line == "" or line.startswith("#"), f"header line is not a comment: {line!r}"
    assert not RAW_CONTROL.search(text), f"control character in ssh_config: {text[:300]!r}"
    need_tools("ssh")
    cfg = tmp_path / "ssh_config"
    cfg.write_text(text)
    for name in ("gpu1", "unrelated.example.org"):
        opts = ssh_g(cfg, name)
        assert not any(o.startswith("proxycommand ") and o != "proxycommand none" for o in opts), \
            [o for o in opts if o.startswith("proxycommand")]


@pytest.mark.parametrize("fname", list(FILE_NAMES.values()), ids=list(FILE_NAMES))
def test_directory_inventory_file_names_escaped_in_check_output(fname: str, tmp_path: Path) -> None:
    """control: `check` prints the inventory's file names: escaped, one summary line."""
    d = _dir_inventory(fname, tmp_path)
    result = cli("check", "-i", str(d))
    if _refused_cleanly(result, d):
        return
    assert_no_raw_controls(result.stdout + result.stderr)
    assert len(result.stdout.splitlines()) == 1, f"one summary line expected: {result.stdout!r}"


def test_bad_inventory_in_ansi_named_file_is_reported_escaped(tmp_path: Path) -> None:
    """control: the file name goes into every error message: escaped there."""
    d = tmp_path / "inv"
    d.mkdir()
    (d / "\x1b[2J\x1b[32mok.yml").write_text("version: 1\nhosts:\n  gpu1: {address: 10.0.0.1, port: 0}\n")
    result = cli("check", "-i", str(d))
    assert result.exit_code == 2
    assert_no_raw_controls(result.stdout + result.stderr)
    assert "\\x1b[2J" in result.stderr


# --- (9) a node named like an output file ------------------------------------------------------

@pytest.mark.parametrize("section", ["hosts", "bastions"])
def test_node_named_ssh_config_is_refused_by_render_with_nothing_written(
        section: str, tmp_path: Path) -> None:
    data = inv()
    if section == "hosts":
        data["hosts"]["ssh_config"] = {"address": "10.0.1.30", "via": "jump", "ssh_from": ["10.0.0.0/24"]}
    else:
        data["bastions"]["ssh_config"] = {"address": "192.0.2.30", "allow_ssh_from": ["203.0.113.0/24"]}
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    r = cli("render", "-i", str(path), "--out", str(out))
    text = r.stdout + r.stderr
    assert r.exit_code == 2, f"exit {r.exit_code}: {text[-600:]} {r.exception!r}"
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "ssh_config" in r.stderr, r.stderr
    leftovers = sorted(str(p.relative_to(out)) for p in out.rglob("*")) if out.exists() else []
    assert not leftovers, f"partial output left behind: {leftovers[:5]}"


def test_render_into_existing_file_path_leaves_nothing(tmp_path: Path) -> None:
    """layout: --out pointing below a regular file fails cleanly, without a traceback."""
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inv()))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = cli("render", "-i", str(path), "--out", str(blocker / "out"))
    assert r.exit_code == 2, f"exit {r.exit_code} {r.exception!r}"
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)


# --- the table's own helpers are right -------------------------------------------------------

@pytest.mark.parametrize("value,expected", [
    ("/bin/a b", [("", ["/bin/a", "b"])]),
    ("+/bin/a b", [("+", ["/bin/a", "b"])]),
    ("/bin/a --x='a b' \"q\"", [("", ["/bin/a", "--x=a b", "q"])]),
    ("/bin/a ; /bin/b", [("", ["/bin/a"]), ("", ["/bin/b"])]),
    ("/bin/a \\; b", [("", ["/bin/a", ";", "b"])]),
])
def test_systemd_word_splitting(value: str, expected: list[tuple[str, list[str]]]) -> None:
    assert exec_commands(value) == expected


def test_shlex_agrees_on_plain_commands() -> None:
    cmd_ = "/usr/bin/python3 -c \"import http.server\" --port 8000"
    assert exec_commands(cmd_) == [("", shlex.split(cmd_))]


# --- (5) at apply time: an existing account that is not ours is never taken over ---------------

EXISTING = {
    "system_uid": ("gitlab-runner", 998, "/home/gitlab-runner"),
    "human_not_created_by_us": ("carl", 1005, "/home/carl"),
    "system_uid_in_var": ("svcacct", 120, "/var/lib/svcacct"),
}


@pytest.mark.parametrize("name,uid,home", list(EXISTING.values()), ids=list(EXISTING))
def test_users_step_refuses_an_existing_account_that_is_not_ours(
        name: str, uid: int, home: str, tmp_path: Path) -> None:
    """team: a member named like an account that exists on the host with a system uid, or
    that provision did not create (no marker in its authorized_keys), is refused: no key,
    shell, sudoers or directory change for it (an error for that host is fine)."""
    from provision.errors import ProvisionError
    from provision.facts import parse
    from provision.steps.actions import EnsureUser, Mkdir, SetAttrs, WriteFile
    from provision.steps.users import UsersStep
    from tests.support.probe_records import answer, file_rec, user_rec

    data = inv((f"team.{name}", {"keys": [f"{ED2} x@y"], "sudo": True}))
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(data))
    model = load_inventory(path)
    theirs = f"{ED} someone-else@their-laptop\n"
    facts = parse(answer(
        user_rec(name, uid=uid, home=home, shell="/usr/sbin/nologin" if uid < 1000 else "/bin/bash",
                 comment=""),
        file_rec(f"{home}/.ssh/authorized_keys", theirs, mode="600", owner=name, group=name),
    ))
    try:
        actions = UsersStep(model, model.node("gpu1")).diff(facts)
    except ProvisionError:
        return
    touched = [a.describe() for a in actions
               if isinstance(a, EnsureUser | Mkdir | SetAttrs | WriteFile)
               and (getattr(a, "name", None) == name or home in getattr(a, "path", "")
                    or getattr(a, "path", "").endswith(f"provision-{name}"))]
    assert not touched, f"existing account {name} (uid {uid}) would be taken over: {touched}"
