"""Properties of every rendered file, over generated valid inventories (issue 10).

A hypothesis strategy builds small inventories (bastions and hosts with v4/v6/DNS
addresses, jump chains, ssh_from CIDRs, services with ports, binds and commands from safe
vocabularies), writes them as YAML and loads them with `load_inventory`; the ones the
loader (or the lockout guard of the renderer) refuses are skipped with `assume`. The
oracle is the generated data itself, not the model:

- `ssh -G -F ssh_config NAME` reads back exactly the declared hostname, user, port and
  jump chain for every bastion and host, and none of our options for a name the inventory
  does not declare;
- the four iptables files of every node load with `iptables-restore --test` /
  `ip6tables-restore --test` (inside a throwaway network namespace), and every `-s` source
  is one the inventory declared for that node;
- the service units pass `systemd-analyze verify`, and `ExecStart=` split the way systemd
  splits it is exactly the declared command with its placeholders filled.
"""

from __future__ import annotations

import ipaddress
import shlex
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from provision.errors import RenderError
from provision.inventory import InventoryError, load_inventory
from provision.inventory.catalog import service_account
from provision.inventory.model import Inventory
from provision.render import render_host, render_ssh_config
from tests.support.tools import (
    exec_commands,
    in_netns,
    make_netns,
    need_tools,
    ssh_g,
    verify_problems,
)

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
# No shrinking for the edgy variants: while the loader lets such values through, shrinking
# several distinct failures through subprocesses takes minutes; the first failing example
# is reported as found.
EDGY = settings(SETTINGS, max_examples=25, report_multiple_bugs=False,
                phases=[Phase.explicit, Phase.reuse, Phase.generate])
VENV = sys.prefix  # has python, jupyter and tensorboard: units whose programs exist here
IDENTITY = "~/.ssh/provision_prop_key"
KNOWN_HOSTS = "~/.ssh/provision_prop_known_hosts"
UNDECLARED = "undeclared-host.example.net"

# --- vocabularies ------------------------------------------------------------------------------

BASTION_NAMES = ["jump", "bast-1", "b.x", "j_2", "edge0"]
HOST_NAMES = ["gpu1", "gpu-2", "node.a", "h_3", "trainer", "10-0-1-9"]
USERS = ["ubuntu", "admin", "_svc", "deploy-1", "ml"]
SERVICE_USERS = ["_worker", "runner", "deploy-2"]  # never a login user: those are refused
SERVICE_NAMES = ["web", "api", "metrics.x", "svc_1", "model-api"]
BINDS = ["127.0.0.1", "0.0.0.0", "::1", "::", "10.0.1.5", "2001:db8::5"]
COMMANDS = [
    "{venv}python -m http.server --bind {bind} {port}",
    "/usr/bin/env PYTHONPATH=/srv/app {venv}python -m http.server --bind {bind} {port}",
    "{venv}python -c 'import sys; print(sys.argv)' --user {user} --port {port}",
    "/usr/bin/python3 -m http.server --bind {bind} \"{port}\"",
    "/bin/sleep {port}",
]


def _v4_host() -> st.SearchStrategy[str]:
    return st.builds(lambda a, b, c: f"{a}.{b}.{c}.{(a + b + c) % 250 + 1}",
                     st.sampled_from([10, 172, 192, 198, 203]), st.integers(0, 255),
                     st.integers(0, 255))


def _v6_host() -> st.SearchStrategy[str]:
    return st.builds(lambda a, b: str(ipaddress.IPv6Address(f"2001:db8:{a:x}::{b:x}")),
                     st.integers(0, 0xFFFF), st.integers(1, 0xFFFF))


ADDRESSES = st.one_of(_v4_host(), _v6_host(),
                      st.sampled_from(["jump.example.org", "gpu1.lab.test", "a-b.example.",
                                       "host_1.example.com"]))

# Values a hostile (or careless) editor can write that the type of the field might accept:
# IPv6 scope ids carrying quotes, commas, $( ), backslashes, %-specifiers; systemd command
# prefixes and a lone ';'. The `edgy` tests mix them in: whatever the loader accepts must
# still satisfy every property (and what it refuses is skipped).
EDGY_ADDRESSES = ["fe80::1%eth0", 'fe80::1%"x', "fe80::1%a,b", "fe80::1%$(id)", "fe80::1%x\\"]
EDGY_BINDS = ["fe80::1%eth0", "fe80::1%x\\", "fe80::1%h", "fe80::1%;"]
EDGY_CIDRS = ["fe80::%eth0/64", "fe80::%a,fe80::/10", "fe80::%$(id)/64"]
EDGY_COMMANDS = ["+/bin/sleep {port}", "-/bin/sleep {port}", "/bin/sleep {port} ; /bin/true",
                 "!/bin/sleep {port}"]


def _cidr(draw: Any, edgy: bool = False) -> str:
    if edgy and draw(st.integers(0, 4)) == 0:
        return draw(st.sampled_from(EDGY_CIDRS))
    if draw(st.booleans()):
        addr = draw(_v4_host())
        prefix = draw(st.sampled_from([8, 16, 24, 28, 32]))
    else:
        addr = draw(_v6_host())
        prefix = draw(st.sampled_from([32, 48, 64, 128]))
    return str(ipaddress.ip_network(f"{addr}/{prefix}", strict=False))


@st.composite
def cidrs(draw: Any, min_size: int = 0, max_size: int = 3, edgy: bool = False) -> list[str]:
    n = draw(st.integers(min_size, max_size))
    return list(dict.fromkeys(_cidr(draw, edgy) for _ in range(n)))


def _pick(draw: Any, safe: Any, edgy_values: list[str], edgy: bool) -> str:
    if edgy and draw(st.integers(0, 3)) == 0:
        return str(draw(st.sampled_from(edgy_values)))
    return str(draw(safe))


@st.composite
def services(draw: Any, edgy: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ports = iter(draw(st.lists(st.integers(1024, 65535), min_size=4, max_size=4, unique=True)))
    for name in draw(st.lists(st.sampled_from(SERVICE_NAMES), max_size=3, unique=True)):
        s: dict[str, Any] = {"port": next(ports),
                             "command": _pick(draw, st.sampled_from(COMMANDS), EDGY_COMMANDS, edgy)}
        if "{venv}" in s["command"] or draw(st.booleans()):
            s["venv"] = VENV
        if draw(st.booleans()):
            s["bind"] = _pick(draw, st.sampled_from(BINDS), EDGY_BINDS, edgy)
        if draw(st.booleans()):
            s["user"] = draw(st.sampled_from(SERVICE_USERS))
        kind = draw(st.sampled_from(["default", "tunnel", "none", "public"]))
        if kind == "public":
            s["expose"] = {"from": draw(cidrs(min_size=1, edgy=edgy))}
        elif kind != "default":
            s["expose"] = kind
        out[name] = s
    if draw(st.booleans()):
        out["jupyter"] = {"venv": VENV}
    if draw(st.booleans()):
        out["tensorboard"] = {"venv": VENV, "logdir": "/srv/runs"}
    return out


@st.composite
def inventories(draw: Any, edgy: bool = False) -> dict[str, Any]:
    edgy = edgy and draw(st.integers(0, 2)) > 0  # a third stay plain: progress once refused
    addresses = st.one_of(ADDRESSES, st.sampled_from(EDGY_ADDRESSES)) if edgy else ADDRESSES
    defaults: dict[str, Any] = {"user": draw(st.sampled_from(USERS)), "identity_file": IDENTITY,
                                "known_hosts": KNOWN_HOSTS}
    if draw(st.booleans()):
        defaults["port"] = draw(st.integers(1, 65535))
    bastions: dict[str, Any] = {}
    for i, name in enumerate(draw(st.lists(st.sampled_from(BASTION_NAMES), min_size=0, max_size=3,
                                           unique=True))):
        b: dict[str, Any] = {"address": draw(addresses),
                             "allow_ssh_from": draw(cidrs(min_size=1, edgy=edgy))}
        if draw(st.booleans()):
            b["egress"] = draw(cidrs(min_size=1, max_size=2, edgy=edgy))
        if i > 0 and draw(st.booleans()):
            b["via"] = draw(st.sampled_from(list(bastions)))  # only earlier ones: no cycles
        if draw(st.booleans()):
            b["user"] = draw(st.sampled_from(USERS))
        if draw(st.booleans()):
            b["port"] = draw(st.integers(1, 65535))
        bastions[name] = b
    hosts: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(HOST_NAMES), min_size=1, max_size=3, unique=True)):
        h: dict[str, Any] = {"address": draw(addresses)}
        if bastions and draw(st.booleans()):
            names = draw(st.lists(st.sampled_from(list(bastions)), min_size=1, max_size=2,
                                  unique=True))
            h["via"] = names[0] if len(names) == 1 and draw(st.booleans()) else names
        h["ssh_from"] = draw(cidrs(min_size=0 if "via" in h else 1, edgy=edgy))
        if draw(st.booleans()):
            h["user"] = draw(st.sampled_from(USERS))
        if draw(st.booleans()):
            h["port"] = draw(st.integers(1, 65535))
        h["services"] = draw(services(edgy=edgy))
        hosts[name] = h
    return {"version": 1, "defaults": defaults, "bastions": bastions, "hosts": hosts}


# --- the oracle: what the generated data declares ---------------------------------------------

def _via(node: dict[str, Any]) -> list[str]:
    via = node.get("via")
    return [] if via is None else [via] if isinstance(via, str) else list(via)


def declared_chain(data: dict[str, Any], node: dict[str, Any]) -> list[str]:
    """ProxyJump chain, outermost first: the chain to reach via[0], then via."""
    direct = _via(node)
    if not direct:
        return []
    return [*declared_chain(data, data["bastions"][direct[0]]), *direct]


def declared_nodes(data: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], bool]]:
    for name, b in data["bastions"].items():
        yield name, b, True
    for name, h in data["hosts"].items():
        yield name, h, False


def declared_sources(data: dict[str, Any], node: dict[str, Any], is_bastion: bool) -> set[Any]:
    """Every CIDR the inventory lets into this node (plus the link-local MLD rule we add)."""
    own = node.get("allow_ssh_from" if is_bastion else "ssh_from", [])
    chain = declared_chain(data, node)
    jump: list[str] = []
    if chain:
        last = data["bastions"][chain[-1]]
        jump = list(last.get("egress") or [])
        if not jump:
            try:
                jump = [str(ipaddress.ip_network(ipaddress.ip_address(last["address"])))]
            except ValueError:
                jump = []
    exposed = [c for s in node.get("services", {}).values()
               if isinstance(s.get("expose"), dict) for c in s["expose"]["from"]]
    return {ipaddress.ip_network(c) for c in (*own, *jump, *exposed, "fe80::/10")}


CATALOG_COMMANDS = {
    "jupyter": ("{venv}jupyter server --config={config}", 8888),
    "tensorboard": ("{venv}tensorboard --logdir {logdir} --host {bind} --port {port}", 6006),
}


def declared_argv(data: dict[str, Any], name: str, s: dict[str, Any]) -> list[str]:
    command, port = CATALOG_COMMANDS.get(name, (s.get("command"), s.get("port")))
    command = s.get("command", command)
    values = {
        "bind": s.get("bind", "127.0.0.1"),
        "port": str(s.get("port", port)),
        "logdir": s.get("logdir", ""),
        "notebook_dir": s.get("notebook_dir", ""),
        "config": f"/etc/provision/jupyter/{name}/jupyter_server_config.py",
        "user": s.get("user", service_account(name)),
        "venv": f"{s['venv'].rstrip('/')}/bin/" if s.get("venv") else "",
    }
    # Split the declared command first, then fill each word: a placeholder is one value,
    # never a source of extra words or quotes.
    return [_fill(w, values) for w in shlex.split(command)]


def _fill(word: str, values: dict[str, str]) -> str:
    for k, v in values.items():
        word = word.replace("{" + k + "}", v)
    return word


# --- loading a generated inventory ---------------------------------------------------------------

def load(data: dict[str, Any], tmp: Path) -> Inventory:
    path = tmp / "inventory.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        return load_inventory(path)
    except InventoryError:
        assume(False)
        raise


def rendered(inv: Inventory, name: str) -> dict[str, str]:
    try:
        return {a.path: a.content for a in render_host(inv, inv.node(name))}
    except RenderError:  # the lockout guard: no SSH source for the operator
        assume(False)
        raise


# --- ssh_config ----------------------------------------------------------------------------------

def _opts(lines: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for ln in lines:
        key, _, value = ln.partition(" ")
        out.setdefault(key, []).append(value)
    return out


@SETTINGS
@given(inventories())
def test_ssh_config_reads_back_exactly_the_declared_options(data: dict[str, Any]) -> None:
    check_ssh_config(data)


@EDGY
@given(inventories(edgy=True))
def test_ssh_config_reads_back_exactly_the_declared_options_edgy(data: dict[str, Any]) -> None:
    check_ssh_config(data)


def check_ssh_config(data: dict[str, Any]) -> None:
    need_tools("ssh")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        inv = load(data, tmp)
        cfg = tmp / "ssh_config"
        cfg.write_text(render_ssh_config(inv))
        default_user = data["defaults"]["user"]
        default_port = data["defaults"].get("port", 22)
        for name, node, _ in declared_nodes(data):
            o = _opts(ssh_g(cfg, name))
            assert o["hostname"] == [node["address"].lower()], (name, o["hostname"])
            assert o["user"] == [node.get("user", default_user)], (name, o["user"])
            assert o["port"] == [str(node.get("port", default_port))], (name, o["port"])
            chain = declared_chain(data, node)
            assert o.get("proxyjump", []) == ([",".join(chain)] if chain else []), (name, o.get("proxyjump"))
            assert IDENTITY.replace("~", str(Path.home())) in o.get("identityfile", []) or \
                IDENTITY in o.get("identityfile", []), o.get("identityfile")
        other = _opts(ssh_g(cfg, UNDECLARED))
        assert other["hostname"] == [UNDECLARED]
        assert "proxyjump" not in other, other.get("proxyjump")
        assert "proxycommand" not in other or other["proxycommand"] == ["none"]
        assert not any("provision_prop" in v for v in other.get("identityfile", []))
        assert not any("provision_prop" in v for v in other.get("userknownhostsfile", []))
        assert "localforward" not in other
        assert other["serveraliveinterval"] == ["0"], "our defaults leaked to an undeclared host"


# --- iptables ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ns() -> Iterator[str]:
    yield from make_netns()


RULE_FILES = (("iptables-restore", "/etc/iptables/rules.v4"),
              ("ip6tables-restore", "/etc/iptables/rules.v6"),
              ("iptables-restore", "/etc/iptables/provision-docker.v4"),
              ("ip6tables-restore", "/etc/iptables/provision-docker.v6"))


def rule_sources(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        if not line.startswith("-A "):
            continue
        words = shlex.split(line)
        out += [words[i + 1] for i, w in enumerate(words) if w in ("-s", "--source")]
    return out


@SETTINGS
@given(inventories())
def test_iptables_rules_load_and_admit_only_declared_sources(ns: str, data: dict[str, Any]) -> None:
    check_iptables(ns, data)


@EDGY
@given(inventories(edgy=True))
def test_iptables_rules_load_and_admit_only_declared_sources_edgy(
        ns: str, data: dict[str, Any]) -> None:
    check_iptables(ns, data)


def check_iptables(ns: str, data: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        inv = load(data, tmp)
        for name, node, is_bastion in declared_nodes(data):
            files = rendered(inv, name)
            allowed = declared_sources(data, node, is_bastion)
            for tool, path in RULE_FILES:
                f = tmp / f"{name}-{Path(path).name}"
                f.write_text(files[path])
                p = in_netns(ns, tool, "--test", str(f), check=False)
                assert p.returncode == 0, f"{tool} --test {path} of {name}: {p.stderr}\n{files[path]}"
                for src in rule_sources(files[path]):
                    assert "," not in src and "%" not in src, f"{name} {path}: odd source {src!r}"
                    assert ipaddress.ip_network(src) in allowed, \
                        f"{name} {path}: source {src} was never declared (declared: {sorted(map(str, allowed))})"


# --- systemd units --------------------------------------------------------------------------------

@SETTINGS
@given(inventories())
def test_units_verify_and_execstart_is_the_declared_command(data: dict[str, Any]) -> None:
    check_units(data)


@EDGY
@given(inventories(edgy=True))
def test_units_verify_and_execstart_is_the_declared_command_edgy(data: dict[str, Any]) -> None:
    check_units(data)


def check_units(data: dict[str, Any]) -> None:
    need_tools("systemd-analyze")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        inv = load(data, tmp)
        units: list[Path] = []
        for name, node in data["hosts"].items():
            files = rendered(inv, name)
            for sname, s in node["services"].items():
                text = files[f"/etc/systemd/system/provision-{sname}.service"]
                lines = [ln for ln in text.splitlines() if ln.startswith("ExecStart")]
                assert len(lines) == 1, lines
                cmds = exec_commands(lines[0].removeprefix("ExecStart="))
                assert cmds == [("", declared_argv(data, sname, s))], (name, sname, lines[0])
                # its own account unless the inventory names one (docs/trust-model.md)
                assert f"User={s.get('user', service_account(sname))}" in text.splitlines()
                f = tmp / name / f"provision-{sname}.service"
                f.parent.mkdir(exist_ok=True)
                f.write_text(text)
                units.append(f)
        if units:
            problems = verify_problems(*map(str, units))
            assert not problems, "\n".join(problems)
