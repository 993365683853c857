"""Per-user Jupyter and the team's TensorBoard directory (issue 24), pure parts: port
allocation, the model's instances, rendering, the services diff on a converged host, the
tunnel's choices and token handling, audit's and check's findings. Fixed step cases:
tests/steps/services/per-user-*.json; refused inventories: tests/fixtures/bad/6[2-9]-*."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from provision.exposure import findings
from provision.exposure.jupyter import member_server_findings
from provision.facts import parse
from provision.facts.jupyter_auth import JupyterAnswer, JupyterAuth, PortHolder, SocketAnswer
from provision.inventory import Inventory, load_inventory
from provision.inventory.member_ports import allocate, hashed_port
from provision.render import render_host, render_ssh_config
from provision.steps.actions import RestartUnit, RetireUnit
from provision.steps.member_servers import retired_instances
from provision.steps.services import ServicesStep
from provision.tunnel.ports import TunnelError, plan_forwards, select_services
from provision.tunnel.tokens import (
    ServiceState,
    check_passed,
    check_request,
    member_token_state,
    probe_command,
    service_state,
)
from tests.support.probe_records import answer, file_rec, unit_block, user_rec

INV = Path(__file__).parent.parent / "fixtures" / "member_servers" / "inventory.yml"
NAMES = [f"{a}{b}" for a in ("ann", "ben", "cat", "dan", "eve", "fay") for b in ("", "x", "y", "z")]


@pytest.fixture(scope="module")
def inv() -> Inventory:
    return load_inventory(INV)


# --- ports ---------------------------------------------------------------------------------

def test_a_members_port_is_their_names_and_stays_put_when_others_come_and_go() -> None:
    rng = random.Random(24)
    for _ in range(200):
        team = rng.sample(NAMES, rng.randint(1, len(NAMES)))
        ports, clashes = allocate(team, {}, 20000, 29999)
        if clashes:
            continue
        changed = [n for n in team if rng.random() < 0.5] + rng.sample(NAMES, 3)
        after, clashes = allocate(list(dict.fromkeys(changed)), {}, 20000, 29999)
        if clashes:
            continue
        assert all(after[n] == ports[n] for n in after if n in ports)
    assert hashed_port("alice", 20000, 29999) == 20207  # a stable function, not Python's hash()


def test_names_on_one_port_are_an_error_until_one_is_pinned() -> None:
    ports, clashes = allocate(["bob", "carol"], {}, 20000, 20003)
    assert [c.member for c in clashes] == ["carol"]
    assert "pin carol to a free one, e.g. {carol: {port: 20000}}" in clashes[0].message
    ports, clashes = allocate(["bob", "carol"], {"carol": 20000}, 20000, 20003)
    assert clashes == [] and ports == {"bob": 20002, "carol": 20000}


def test_a_pin_on_someone_elses_port_blames_the_pin_and_a_full_range_says_so() -> None:
    _, clashes = allocate(["alice", "bob"], {"bob": 20003}, 20000, 20003)
    assert [c.member for c in clashes] == ["bob"]  # alice's port comes from her name
    _, clashes = allocate(["alice", "bob", "carol"], {}, 20000, 20001)
    assert "3 members need a port but per_user_ports 20000-20001 holds 2" in clashes[0].message


# --- model and rendering -------------------------------------------------------------------

def test_one_instance_per_member_on_their_port_tunnelled_from_8888(inv: Inventory) -> None:
    gpu1 = inv.node("gpu1")
    alice, bob = gpu1.services[:2]
    assert (alice.name, alice.unit_name, alice.user, alice.member) == (
        "jupyter@alice", "provision-jupyter@alice.service", "alice", "alice")
    assert (alice.port, bob.port, alice.local_port, alice.bind) == (20207, 28650, 8888, "127.0.0.1")
    assert (alice.gpus, alice.memory_max, bob.gpus, bob.memory_max) == ((1,), "32G", None, "16G")


def test_template_and_drop_ins_carry_no_token_and_no_specifier_from_data(inv: Inventory) -> None:
    arts = {a.path: a for a in render_host(inv, inv.node("gpu1"))}
    template = arts["/etc/systemd/system/provision-jupyter@.service"].content
    assert "User=%i" in template and "WorkingDirectory=~" in template and "ExecStart" not in template
    # the socket's directory: made by systemd for the member's server alone
    assert "\nRuntimeDirectory=%p/%i\nRuntimeDirectoryMode=0700\n" in template
    dropin = arts["/etc/systemd/system/provision-jupyter@alice.service.d/50-provision.conf"].content
    assert dropin.splitlines()[1:] == [
        "[Service]",
        "ExecStart=/opt/venv/bin/jupyter server "
        "--config=/etc/provision/jupyter/jupyter@alice/jupyter_server_config.py",
        "Environment=CUDA_VISIBLE_DEVICES=1", "MemoryMax=32G"]
    config = arts["/etc/provision/jupyter/jupyter@alice/jupyter_server_config.py"].content
    # on a Unix socket, not a loopback port any account could take while it is down
    assert "c.ServerApp.sock = '/run/provision-jupyter/alice/jupyter.sock'" in config
    assert "c.ServerApp.sock_mode = \"0600\"" in config and "c.ServerApp.port" not in config
    assert "c.KernelManager.transport = \"ipc\"" in config
    assert "c.IdentityProvider.token = member_token()" in config
    assert "0o600" in config and "O_NOFOLLOW" in config
    compile(config, "jupyter_server_config.py", "exec")


def test_each_login_gets_only_their_own_forward(inv: Inventory) -> None:
    def forwards(user: str | None) -> list[str]:
        text = render_ssh_config(inv, user=user)
        return [ln.strip() for ln in text.splitlines() if "LocalForward" in ln]

    assert forwards("alice") == ["LocalForward 127.0.0.1:6006 127.0.0.1:6006",
                                 "LocalForward 127.0.0.1:8888 /run/provision-jupyter/alice/jupyter.sock"]
    assert forwards(None) == ["LocalForward 127.0.0.1:6006 127.0.0.1:6006"]


# --- the services step on a converged host ---------------------------------------------------

def _converged(inv: Inventory, *extra: str | list[str]) -> tuple[ServicesStep, list[str | list[str]]]:
    step = ServicesStep.build(inv, inv.node("gpu1"))
    recs: list[str | list[str]] = [file_rec(a.path, a.content, f"{a.mode:o}", a.owner, a.group)
                                   for a in step.artifacts]
    recs += ["dir\t/srv/runs\t2770\tsvc-tensorboard\tml", "group\tml\talice,bob",
             user_rec("svc-tensorboard", 990, "/var/lib/provision-services/svc-tensorboard",
                      "/usr/sbin/nologin", comment="provision service"),
             user_rec("alice", 1001), user_rec("bob", 1002)]
    recs += [unit_block(u) for u in ("provision-jupyter@alice.service",
                                     "provision-jupyter@bob.service", "provision-tensorboard.service")]
    return step, [*recs, *extra]


def test_a_converged_team_host_is_a_no_op(inv: Inventory) -> None:
    step, recs = _converged(inv)
    assert step.diff(parse(answer(*recs))) == []


def test_a_template_change_restarts_every_members_server(inv: Inventory) -> None:
    step, recs = _converged(inv)
    i = next(i for i, r in enumerate(recs) if isinstance(r, str) and "jupyter@.service" in r)
    recs[i] = file_rec("/etc/systemd/system/provision-jupyter@.service", "old\n")
    acts = step.diff(parse(answer(*recs)))
    port = {s.member: s.port for s in step.host.services if s.member}  # each member's own
    assert [a for a in acts if isinstance(a, RestartUnit)] == [
        RestartUnit("provision-jupyter@alice.service", "template unit changed", (port["alice"],)),
        RestartUnit("provision-jupyter@bob.service", "template unit changed", (port["bob"],))]


def test_only_running_or_enabled_instances_of_our_templates_are_retired(inv: Inventory) -> None:
    step, recs = _converged(inv, unit_block("provision-jupyter@carol.service"),
                            unit_block("provision-jupyter@dan.service", active="inactive",
                                       enabled="disabled"),
                            unit_block("provision-other@eve.service"))
    facts = parse(answer(*recs))
    assert retired_instances(inv.node("gpu1"), facts) == ["provision-jupyter@carol.service"]
    assert step.diff(facts) == [RetireUnit("provision-jupyter@carol.service",
                                           "its member is no longer listed")]


def test_someone_who_left_is_taken_out_of_the_group(inv: Inventory) -> None:
    step, recs = _converged(inv)
    recs = [("group\tml\talice,bob,carol" if r == "group\tml\talice,bob" else r) for r in recs]
    facts = parse(answer(*recs, "managed\tcarol", user_rec("carol", 1003)))
    (act,) = step.diff(facts)
    assert act.describe() == "group ml; remove carol"


# --- tunnel ---------------------------------------------------------------------------------

def test_a_member_tunnels_to_their_own_server_and_shared_ones_only(inv: Inventory) -> None:
    gpu1 = inv.node("gpu1")
    assert [s.name for s in select_services(gpu1, [], "bob")] == ["jupyter@bob", "tensorboard"]
    assert [s.name for s in select_services(gpu1, ["jupyter"], "bob")] == ["jupyter@bob"]
    assert [s.name for s in select_services(gpu1, [], "admin")] == ["tensorboard"]
    with pytest.raises(TunnelError, match="alice's own server; only alice's login"):
        select_services(gpu1, ["jupyter@alice"], "bob")
    with pytest.raises(TunnelError, match="jupyter is per-user and admin has none"):
        select_services(gpu1, ["jupyter"], "admin")
    (fwd,) = plan_forwards(select_services(gpu1, ["jupyter"], "bob"), lambda p: True)
    assert (fwd.local_port, fwd.remote_port) == (8888, 28650)


def test_the_token_is_read_from_the_members_file_by_their_own_login_only(inv: Inventory) -> None:
    gpu1 = inv.node("gpu1")
    services = select_services(gpu1, [], "bob")
    cmd = probe_command(services, "bob", check_listening=False)
    assert "cat -- ~/.local/share/provision/jupyter-token" in cmd
    assert "sudo" not in cmd and "server list" not in cmd and "alice" not in cmd
    # the operator's login asks no member's token, and would not be given one
    assert "jupyter-token" not in probe_command(gpu1.services, "admin", check_listening=False)
    alice = gpu1.services[0]
    assert member_token_state(alice, {"token": "a" * 64}, "admin", True).token is None


@pytest.mark.parametrize(("text", "token", "note"), [
    ("0123abcd" * 8 + "\n", "0123abcd" * 8, ""),
    ("cat: /home/bob/.local/share/provision/jupyter-token: No such file or directory\n", None,
     "token unknown: no token file yet (the server makes it when it starts)"),
    ("cat: x: Permission denied\n", None, "token unknown: the token file is not readable by its member"),
    ("abc@evil.example/\n", None, "token unknown: the token file holds no plain token"),
])
def test_what_the_token_file_said(inv: Inventory, text: str, token: str | None, note: str) -> None:
    bob = inv.node("gpu1").services[1]
    st = service_state(bob, {"listen": "yes\n", "token": text, "owners": "1001 1001\n"}, "bob")
    assert (st.token, st.note, st.listening) == (token, note, True)


@pytest.mark.parametrize(("owners", "note"), [
    ("1001 1001 1002\n", "token withheld: port 28650 on the host is held by uid 1002, not bob "
     "(another account listening in place of their server would be sent it)"),
    ("", "token withheld: the host did not say who listens on port 28650"),
    ("1001 x\n", "token withheld: the host did not say who listens on port 28650"),
])
def test_no_token_for_a_port_another_account_holds(inv: Inventory, owners: str, note: str) -> None:
    """A member's server on a loopback port (per_user_socket: false)."""
    bob = dataclasses.replace(inv.node("gpu1").services[1], socket=None)
    st = service_state(bob, {"listen": "yes\n", "token": "0123abcd" * 8, "owners": owners}, "bob")
    assert (st.token, st.note) == (None, note)
    # nobody listening (the server is down): the port is anybody's to take, so no token
    # either (issue 34: bob, holding alice's port unlistened, was handed her token)
    st = service_state(bob, {"token": "0123abcd" * 8, "owners": "1001\n"}, "bob")
    assert (st.token, st.note) == (None, "token withheld: bob's server does not listen on port "
                                   "28650 (while it is down another account could take the port "
                                   "and be sent the token)")
    assert service_state(bob, {"token": "0123abcd" * 8, "owners": "1001 1001\n"}, "bob").token


def test_a_members_socket_cannot_be_squatted_so_its_token_is_handed_out(inv: Inventory) -> None:
    bob = inv.node("gpu1").services[1]
    assert bob.socket == "/run/provision-jupyter/bob/jupyter.sock"
    for sections in ({"token": "0123abcd" * 8}, {"token": "0123abcd" * 8, "listen": "no\n"}):
        assert service_state(bob, sections, "bob").token == "0123abcd" * 8


def test_check_proves_the_token_with_api_status() -> None:
    assert check_request(ServiceState(token="t0k")) == ("/api/status?token=t0k", True)
    assert check_request(ServiceState()) == ("/", False)
    # a member's own server passes only with its token: what answers without one (another
    # account on its port, say) is not known to be theirs
    assert check_request(ServiceState(own=True, note="token withheld: ...")) is None
    assert check_request(ServiceState(own=True, token="t0k")) == ("/api/status?token=t0k", True)
    assert check_passed("HTTP/1.1 200 OK", True)
    assert not check_passed("HTTP/1.1 403 Forbidden", True)
    assert not check_passed("HTTP/1.1 302 Found", True)
    assert check_passed("HTTP/1.1 302 Found", False) and not check_passed(None, False)


# --- audit and check ------------------------------------------------------------------------

def test_audit_wants_each_members_server_up_behind_a_token_and_run_by_them(inv: Inventory) -> None:
    """On a loopback port (per_user_socket: false): up, behind a token, run by the member,
    and nobody else listening there (issue 34: audit called a squatted port "server down")."""
    host = inv.node("gpu1")
    gpu1 = dataclasses.replace(host, services=tuple(dataclasses.replace(s, socket=None)
                                                      for s in host.services))
    ok = JupyterAuth((JupyterAnswer("127.0.0.1", 20207, 11, 403, "alice"),
                      JupyterAnswer("127.0.0.1", 28650, 12, 403, "bob")),
                     holders=(PortHolder("alice", 20207, 11, "alice"),))
    assert member_server_findings(gpu1, ok) == []
    wrong = JupyterAuth((JupyterAnswer("127.0.0.1", 20207, 11, 403, "admin"),))
    got = {(f.code, f.subject) for f in member_server_findings(gpu1, wrong)}
    assert got == {("member-server-owner", "gpu1/jupyter@alice"),
                   ("member-server-down", "gpu1/jupyter@bob")}
    # bob holds alice's port (a plain listener, no jupyter in its command line)
    squat = JupyterAuth((JupyterAnswer("127.0.0.1", 28650, 12, 403, "bob"),),
                        holders=(PortHolder("alice", 20207, 77, "bob"),))
    got = {(f.code, f.subject) for f in member_server_findings(gpu1, squat)}
    assert got == {("member-port-held", "gpu1/jupyter@alice"),
                   ("member-server-down", "gpu1/jupyter@alice")}
    held = next(f for f in member_server_findings(gpu1, squat) if f.code == "member-port-held")
    assert "held by pid 77 of bob" in held.message


def test_audit_asks_each_members_socket_as_the_member(inv: Inventory) -> None:
    gpu1 = inv.node("gpu1")
    ok = JupyterAuth(sockets={"alice": SocketAnswer("alice", "403"), "bob": SocketAnswer("bob", "403")})
    assert member_server_findings(gpu1, ok) == []
    bad = JupyterAuth(sockets={"alice": SocketAnswer("alice", "200"), "bob": SocketAnswer("bob", "absent")})
    got = {(f.code, f.subject) for f in member_server_findings(gpu1, bad)}
    assert got == {("jupyter-no-token", "gpu1/jupyter@alice"), ("member-server-down", "gpu1/jupyter@bob")}


def test_check_finds_a_pinned_port_on_another_service(tmp_path: Path) -> None:
    text = INV.read_text().replace("          bob:\n", "          bob: {port: 6006}\n")
    (tmp_path / "inv.yml").write_text(text)
    found = [f for f in findings(load_inventory(tmp_path / "inv.yml")) if f.code == "port-clash"]
    assert [f.message for f in found] == [
        "port 6006 on 127.0.0.1 is also used by jupyter@bob on gpu1"]
