"""The tunnel's decisions: services, ports, logins, URLs, tokens, backoff, argv (pure)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from provision.inventory import load_inventory
from provision.inventory.forwards import LOCAL_BIND, Forward, remote_target
from provision.inventory.model import Expose, Inventory, Service
from provision.ssh.login import Hop, Login, LoginError, choose_login, hops
from provision.tunnel.backoff import backoff, dead_after
from provision.tunnel.openssh_argv import (
    classify_ssh_error,
    is_host_key_failure,
    openssh_exec_argv,
    openssh_tunnel_argv,
    ssh_argv,
)
from provision.tunnel.ports import TunnelError, pick_local_port, plan_forwards, select_services
from provision.tunnel.rsync import remote_side, rsync_argv
from provision.tunnel.status import rows, service_url
from provision.tunnel.tokens import (
    ServiceState,
    parse_jupyter_list,
    parse_probe,
    probe_command,
    service_state,
    token_command,
)

INV_TEXT = """
version: 1
defaults:
  user: ubuntu
  identity_file: /keys/admin
  known_hosts: /keys/known_hosts
team:
  alice: {keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@x"], identity_file: /keys/alice}
  bob: {keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl bob@x"]}
bastions:
  outer: {address: 192.0.2.1, allow_ssh_from: [198.51.100.0/24]}
  inner: {address: 10.0.0.1, via: outer, port: 2222}
hosts:
  gpu1:
    address: 10.0.1.21
    via: inner
    services:
      jupyter: {user: research, venv: /opt/venv}
      tensorboard: {}
      model-api:
        port: 8000
        bind: 0.0.0.0
        expose: {from: [0.0.0.0/0]}
        command: /opt/venv/bin/uvicorn app:api --host {bind} --port {port}
      metrics: {port: 9100, expose: none, command: /usr/bin/node_exporter}
"""


@pytest.fixture(scope="module")
def inv(tmp_path_factory: pytest.TempPathFactory) -> Inventory:
    p = tmp_path_factory.mktemp("inv") / "inventory.yml"
    p.write_text(INV_TEXT)
    return load_inventory(p)


def svc(name: str = "jupyter", port: int = 8888, bind: str = "127.0.0.1", **kw: object) -> Service:
    base: dict[str, object] = {"expose": Expose("tunnel"), "command": None, "user": "ubuntu"}
    base.update(kw)
    return Service(name=name, port=port, bind=bind, **base)  # type: ignore[arg-type]


# --- services and ports ------------------------------------------------------------------

def test_select_defaults_to_tunnel_services(inv: Inventory) -> None:
    names = [s.name for s in select_services(inv.node("gpu1"), [])]
    assert names == ["jupyter", "tensorboard"]


def test_select_named_and_rejects_non_tunnel(inv: Inventory) -> None:
    gpu1 = inv.node("gpu1")
    assert [s.name for s in select_services(gpu1, ["tensorboard"])] == ["tensorboard"]
    with pytest.raises(TunnelError, match="no service 'tensorbord'"):
        select_services(gpu1, ["tensorbord"])
    with pytest.raises(TunnelError, match="expose: public, not tunnel"):
        select_services(gpu1, ["model-api"])
    with pytest.raises(TunnelError, match="no service with expose: tunnel"):
        select_services(inv.node("outer"), [])


def test_remote_target_maps_wildcards_to_loopback() -> None:
    assert remote_target(svc(bind="127.0.0.1")) == "127.0.0.1"
    assert remote_target(svc(bind="0.0.0.0")) == "127.0.0.1"
    assert remote_target(svc(bind="::")) == "::1"
    assert remote_target(svc(bind="10.0.1.21")) == "10.0.1.21"


def test_pick_port_prefers_the_remote_port_then_nearby() -> None:
    assert pick_local_port(8888, lambda p: True) == 8888
    assert pick_local_port(8888, lambda p: p != 8888) == 8889
    assert pick_local_port(8888, lambda p: p not in (8888, 8889, 8890)) == 8891
    assert pick_local_port(65535, lambda p: p != 65535) == 65534  # nothing above: look below
    assert pick_local_port(8888, lambda p: True, taken=[8888]) == 8889
    with pytest.raises(TunnelError, match="no free local port"):
        pick_local_port(8888, lambda p: False)


def test_plan_forwards_gives_each_service_its_own_port() -> None:
    a, b = svc("a", 8888), svc("b", 8888)
    fw = plan_forwards([a, b], lambda p: True)
    assert [f.local_port for f in fw] == [8888, 8889]
    assert plan_forwards([a], lambda p: True, {"a": 9999})[0].local_port == 9999


# --- logins ---------------------------------------------------------------------------------

def test_login_defaults(inv: Inventory) -> None:
    assert choose_login(inv, None, "nobody-here") == Login(None, None)
    assert choose_login(inv, None, "alice") == Login("alice", "/keys/alice", team_member=True)
    assert choose_login(inv, "bob", "alice") == Login("bob", None, team_member=True)
    assert choose_login(inv, "ubuntu", "alice") == Login("ubuntu", None)
    with pytest.raises(LoginError, match="unknown user 'mallory'"):
        choose_login(inv, "mallory", None)


def test_hops_walk_the_chain_with_the_login(inv: Inventory) -> None:
    gpu1 = inv.node("gpu1")
    default = hops(inv, gpu1, Login(None, None))
    assert [(h.name, h.address, h.port, h.user, h.identity_file) for h in default] == [
        ("outer", "192.0.2.1", 22, "ubuntu", "/keys/admin"),
        ("inner", "10.0.0.1", 2222, "ubuntu", "/keys/admin"),
        ("gpu1", "10.0.1.21", 22, "ubuntu", "/keys/admin"),
    ]
    alice = hops(inv, gpu1, choose_login(inv, "alice", None))
    assert {(h.user, h.identity_file) for h in alice} == {("alice", "/keys/alice")}
    # a team member without a key of their own never gets the admin's key
    bob = hops(inv, gpu1, choose_login(inv, "bob", None))
    assert {(h.user, h.identity_file) for h in bob} == {("bob", None)}


# --- tokens and URLs ------------------------------------------------------------------------

JLIST = "\n".join([
    "[JupyterServerListApp] some log line",
    json.dumps({"base_url": "/", "hostname": "127.0.0.1", "port": 9999, "token": "other"}),
    json.dumps({"base_url": "/lab/", "hostname": "127.0.0.1", "port": 8888, "token": "abc123",
                "url": "http://127.0.0.1:8888/lab/"}),
])


def test_parse_jupyter_list_picks_the_port() -> None:
    st = parse_jupyter_list(JLIST, 8888)
    assert st is not None and st.token == "abc123" and st.base_url == "/lab/"
    assert parse_jupyter_list(JLIST, 7777) is None
    assert parse_jupyter_list("not json {\n{broken", 8888) is None
    nopass = json.dumps({"port": 8888, "token": ""})
    assert parse_jupyter_list(nopass, 8888) == ServiceState(token=None, base_url="/")


def test_urls() -> None:
    fwd = Forward("jupyter", 8890, "127.0.0.1", 8888)
    assert service_url(fwd, ServiceState(token="t0k")) == "http://127.0.0.1:8890/?token=t0k"
    assert service_url(fwd, ServiceState(token="t", base_url="/lab")) == \
        "http://127.0.0.1:8890/lab/?token=t"
    tb = Forward("tensorboard", 6006, "127.0.0.1", 6006)
    assert service_url(tb, ServiceState()) == "http://127.0.0.1:6006/"
    grpc = Forward("tf-serving-grpc", 8500, "127.0.0.1", 8500, scheme="grpc")
    assert service_url(grpc, ServiceState()) == "grpc://127.0.0.1:8500"


def test_token_command_runs_as_the_service_user_in_its_venv(inv: Inventory) -> None:
    jupyter = inv.node("gpu1").service("jupyter")
    assert jupyter is not None
    assert token_command(jupyter, "ubuntu") == \
        "sudo -n -H -u research /opt/venv/bin/jupyter server list --json"
    assert token_command(jupyter, "research") == "/opt/venv/bin/jupyter server list --json"
    assert token_command(svc(), "ubuntu") == "jupyter server list --json"


def test_probe_roundtrip(inv: Inventory) -> None:
    services = select_services(inv.node("gpu1"), [])
    cmd = probe_command(services, "ubuntu", check_listening=True)
    inner = shlex.split(cmd)
    assert inner[:2] == ["bash", "-c"] and len(inner) == 3
    assert "/dev/tcp/127.0.0.1/8888" in cmd and "/dev/tcp/127.0.0.1/6006" in cmd
    assert "jupyter server list --json" in cmd
    assert "/dev/tcp" not in probe_command(services, "ubuntu", check_listening=False)
    out = ("--provision-probe-- jupyter listen\nyes\n--provision-probe-- jupyter jupyter\n"
           f"{JLIST}\n--provision-probe-- tensorboard listen\nno\n")
    sections = parse_probe(out)
    jup = service_state(services[0], sections["jupyter"], "ubuntu")
    assert jup.listening is True and jup.token == "abc123"
    tb = service_state(services[1], sections["tensorboard"], "ubuntu")
    assert tb.listening is False
    fws = plan_forwards(services, lambda p: True)
    table = rows(fws, {"jupyter": jup, "tensorboard": tb}, "gpu1")
    assert table[0].url == "http://127.0.0.1:8888/lab/?token=abc123" and table[0].status == "ok"
    assert table[1].status == "nothing listening" and table[1].remote == "gpu1:127.0.0.1:6006"


def test_token_failure_is_explained(inv: Inventory) -> None:
    jupyter = inv.node("gpu1").service("jupyter")
    assert jupyter is not None
    st = service_state(jupyter, {"listen": "yes\n", "jupyter": "sudo: a password is required\n"},
                       "ubuntu")
    assert st.token is None and "needs a password" in st.note


# --- retries --------------------------------------------------------------------------------

def test_backoff_doubles_and_caps() -> None:
    assert [backoff(i) for i in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff(0, base=0.5, cap=2) == 0.5 and backoff(5, base=0.5, cap=2) == 2
    assert dead_after(15) == 45 and dead_after(2) == 6


# --- argv -----------------------------------------------------------------------------------

def _opts(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-o")


def test_openssh_tunnel_argv() -> None:
    target = Hop("gpu1", "10.0.1.21", 22, "alice", "/keys/alice")
    fws = (Forward("jupyter", 8889, "127.0.0.1", 8888), Forward("tb", 6006, "::1", 6006))
    argv = openssh_tunnel_argv("/usr/bin/ssh", "/tmp/x/ssh_config", target, ["outer", "inner"],
                               fws, "/keys/kh", 2, "/tmp/x/ctl")
    assert argv[0] == "/usr/bin/ssh" and argv[1:3] == ["-F", "/tmp/x/ssh_config"]
    assert "-N" in argv and argv[-1] == "10.0.1.21"
    o = _opts(argv)
    assert o["ExitOnForwardFailure"] == "yes" and o["StrictHostKeyChecking"] == "yes"
    assert o["BatchMode"] == "yes" and o["UserKnownHostsFile"] == "/keys/kh"
    assert o["ServerAliveInterval"] == "2" and o["ServerAliveCountMax"] == "3"
    assert o["ProxyJump"] == "outer,inner" and o["ControlMaster"] == "yes"
    assert o["ControlPath"] == "/tmp/x/ctl" and o["GatewayPorts"] == "no"
    forwards = [argv[i + 1] for i, a in enumerate(argv) if a == "-L"]
    assert forwards == ["127.0.0.1:8889:127.0.0.1:8888", "127.0.0.1:6006:::1:6006"]
    assert all(f.startswith(LOCAL_BIND + ":") for f in forwards)
    assert argv[argv.index("-l") + 1] == "alice" and argv[argv.index("-i") + 1] == "/keys/alice"


def test_openssh_exec_argv_reuses_the_master() -> None:
    target = Hop("gpu1", "10.0.1.21", 2200, "ubuntu", None)
    argv = openssh_exec_argv("ssh", "cfg", target, [], "echo hi", None, 15, "/c")
    o = _opts(argv)
    assert o["ControlMaster"] == "no" and o["ControlPath"] == "/c"
    assert o["ClearAllForwardings"] == "yes" and "ProxyJump" not in o
    assert argv[-3:] == ["10.0.1.21", "--", "echo hi"] and "-i" not in argv
    assert argv[argv.index("-p") + 1] == "2200"


def test_ssh_and_rsync_argv() -> None:
    assert ssh_argv("ssh", "cfg", "gpu1", ()) == ["ssh", "-F", "cfg", "-o", "ClearAllForwardings=yes", "gpu1"]
    assert ssh_argv("ssh", "cfg", "gpu1", ("nvidia-smi", "-L"))[-3:] == ["--", "nvidia-smi", "-L"]
    argv = rsync_argv("rsync", "ssh", "/t/cfg", "/k", "gpu1:~/ckpt/", "./ckpt/")
    assert argv[:2] == ["rsync", "-avhP"] and argv[-2:] == ["gpu1:~/ckpt/", "./ckpt/"]
    e = shlex.split(argv[argv.index("-e") + 1])
    assert e[:3] == ["ssh", "-F", "/t/cfg"] and "UserKnownHostsFile=/k" in e


def test_remote_side() -> None:
    names = ["gpu1", "jump"]
    assert remote_side("gpu1:~/ckpt/", names) == "gpu1"
    assert remote_side("alice@gpu1:/srv", names) == "gpu1"
    assert remote_side("./ckpt/", names) is None
    assert remote_side("other:/x", names) is None
    assert remote_side("/abs/with:colon", names) is None


def test_classify_ssh_errors() -> None:
    unknown = "No ED25519 host key is known for 10.0.1.21 and you have requested strict checking.\r\nHost key verification failed.\r\n"
    assert is_host_key_failure(classify_ssh_error(unknown))
    assert "no ED25519 host key is known for 10.0.1.21" in classify_ssh_error(unknown)
    changed = "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\nHost key verification failed.\n"
    assert "CHANGED" in classify_ssh_error(changed)
    assert classify_ssh_error("alice@10.0.1.21: Permission denied (publickey).") == \
        "authentication failed (permission denied)"
    assert not is_host_key_failure(classify_ssh_error("Connection refused"))


def test_example_inventory_plans(tmp_path: Path) -> None:
    example = Path(__file__).parents[2] / "inventories" / "example.yml"
    if not example.exists():
        pytest.skip("no example inventory")
    inv = load_inventory(example)
    for host in inv.hosts:
        if host.tunnel_services:
            fws = plan_forwards(host.tunnel_services, lambda p: True)
            assert len({f.local_port for f in fws}) == len(fws)
