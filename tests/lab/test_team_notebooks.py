"""One Jupyter per person and a team TensorBoard directory, on the lab's gpu1 (issue 24).

From a bare host (no python environment, no Jupyter): the catalog's default envs
`jupyterlab` and `tensorboard` are built from the lab's own package index (with uv on the
host: tests/lab/test_python_envs.py tests pip), then alice, bob and carol each get their own
Jupyter Server from that env, run by the template unit as themselves; bob (no sudo) opens his with `provision tunnel --user bob`;
alice's token does not open bob's server; bob cannot read alice's token; carol leaves the
team and her server stops, her home stays.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.inventory import load_inventory
from provision.inventory.python_envs import ENVS_ROOT
from tests.support import package_index as I

from .conftest import Lab, one_host_inventory

pytestmark = pytest.mark.lab

HOST = "gpu1"
MEMBERS = ("alice", "bob", "carol")
TOKEN = ".local/share/provision/jupyter-token"
RUNS = "/srv/team-runs"
PLAYBOOK = "name: team\nhosts: [bastions, all]\nsteps: [users, python_envs, services]\n"
UV_LINK = "/usr/local/bin/uv"


def _inventory(lab: Lab, d: Path, members: tuple[str, ...], carol_key: str, index: str) -> Path:
    doc = one_host_inventory(lab, HOST, services={
        # no venv: the catalog's default env `jupyterlab`
        "jupyter": {"per_user": {"alice": {"gpus": [0], "memory_max": "2G"},
                                 **{m: None for m in members if m != "alice"}}},
        "team-board": {"port": 6116, "logdir": RUNS, "group": "ml", "venv": "tensorboard",
                       "command": "{venv}tensorboard --logdir {logdir} --host {bind} --port {port}"},
    })
    # the team's mirror (here: the lab's index), for the envs the services use
    doc["python_envs"] = {"jupyterlab": {"packages": ["jupyterlab"], "index_url": index},
                          "tensorboard": {"packages": ["tensorboard"], "index_url": index}}
    if "carol" in members:
        doc["team"]["carol"] = {"keys": [carol_key]}
    path = d / f"inventory-{len(members)}.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _apply(lab: Lab, inventory: Path, playbook: Path, *hosts: str) -> tuple[int, dict[str, Any], str]:
    return lab.provision_json("apply", *(hosts or (HOST,)), "--yes", "--playbook", str(playbook),
                              "-i", str(inventory))


def _hosts(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["host"]: h for h in data["hosts"]}


SOCKET_GET = """import http.client, socket, sys
class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(5)
        self.sock.connect(sys.argv[1])
try:
    c = Unix("localhost", timeout=5)
    c.request("GET", sys.argv[2])
    print(c.getresponse().status)
except OSError as e:
    print(type(e).__name__)
"""


def _socket(member: str) -> str:
    return f"/run/provision-jupyter/{member}/jupyter.sock"


def _status(lab: Lab, member: str, token: str | None, as_user: str | None = None) -> str:
    """GET /api/status on `member`'s server socket on gpu1, as `as_user` (default: the
    member; root reaches every socket)."""
    path = "/api/status" + (f"?token={token}" if token else "")
    return lab.host(HOST, "runuser", "-u", as_user or member, "--", "python3", "-c", SOCKET_GET,
                    _socket(member), path).stdout.strip()


def _cleanup(lab: Lab) -> None:
    units = " ".join(f"provision-jupyter@{m}.service" for m in MEMBERS)
    lab.host(HOST, "sh", "-c", f"systemctl disable --now {units} provision-team-board.service; "
             "rm -rf /etc/systemd/system/provision-jupyter@* "
             "/etc/systemd/system/provision-team-board.service /etc/provision/jupyter/jupyter@* "
             f"{RUNS}; systemctl daemon-reload; userdel -r carol; groupdel ml", check=False)
    lab.host("bastion", "userdel", "-r", "carol", check=False)


@pytest.fixture(scope="module")
def team(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("team")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "carol@lab",
                    "-f", str(d / "carol")], check=True)
    carol_key = (d / "carol.pub").read_text().strip()
    (d / "team.yml").write_text(PLAYBOOK)
    root = I.build_index(I.wheels(("jupyterlab", "tensorboard")), d / "www")
    with I.mirror(lab.plan) as node, I.serve(node.netns, node.primary.ipv4, root) as index:
        _cleanup(lab)
        lab.host(HOST, "rm", "-rf", ENVS_ROOT, check=False, timeout=300)  # a bare host
        world = {"dir": d, "playbook": d / "team.yml",
                 "all": _inventory(lab, d, MEMBERS, carol_key, index),
                 "without_carol": _inventory(lab, d, MEMBERS[:2], carol_key, index)}
        lab.host(HOST, "ln", "-sf", f"{lab.plan.venv}/bin/uv", UV_LINK)
        try:  # logins on the bastion too
            code, data, err = _apply(lab, world["all"], world["playbook"], "bastion", HOST)
        finally:
            lab.host(HOST, "rm", "-f", UV_LINK)
    assert code == 0, err + json.dumps(data, indent=1)
    built = [a["description"] for a in _hosts(data)[HOST]["actions"] if a["type"] == "BuildPythonEnv"]
    assert len(built) == 2, built  # nothing was there: both envs built from the index
    world["first"] = _hosts(data)[HOST]
    inv = load_inventory(world["all"])
    world["sockets"] = {s.member: s.socket for s in inv.node(HOST).services if s.member}
    assert world["sockets"] == {m: _socket(m) for m in MEMBERS}
    deadline = time.monotonic() + 60
    for m in world["sockets"]:
        while _status(lab, m, None) != "403":
            assert time.monotonic() < deadline, lab.host(
                HOST, "journalctl", "-n", "30", "--no-pager", "-u",
                f"provision-jupyter@{m}.service", check=False).stdout
            time.sleep(0.25)
    yield world
    _cleanup(lab)


def test_each_member_runs_their_own_server_with_their_own_token(lab: Lab, team: dict[str, Any]) -> None:
    assert "gpus of alice not checked: no nvidia-smi" in (team["first"]["note"] or "")
    tokens = {}
    for m in team["sockets"]:
        st = lab.host(HOST, "stat", "-c", "%a %U %G", f"/home/{m}/{TOKEN}").stdout.split()
        assert st == ["600", m, m]
        tokens[m] = lab.host(HOST, "cat", f"/home/{m}/{TOKEN}").stdout.strip()
        pid = lab.host(HOST, "systemctl", "show", "-p", "MainPID", "--value",
                       f"provision-jupyter@{m}.service").stdout.strip()
        assert lab.host(HOST, "ps", "-o", "user=", "-p", pid).stdout.strip() == m
        # the token is on no command line anybody can read with ps
        assert tokens[m] not in lab.host(HOST, "ps", "-eo", "args").stdout
        assert _status(lab, m, None) == "403"
        # on a socket in a directory of theirs (systemd's RuntimeDirectory), on no TCP port
        st = lab.host(HOST, "stat", "-c", "%a %U %F", _socket(m), str(Path(_socket(m)).parent)).stdout
        assert st.split("\n")[:2] == [f"600 {m} socket", f"700 {m} directory"]
        pid = lab.host(HOST, "systemctl", "show", "-p", "MainPID", "--value",
                       f"provision-jupyter@{m}.service").stdout.strip()
        assert f"pid={pid}," not in lab.host(HOST, "ss", "-Htlnp").stdout
    assert len(set(tokens.values())) == 3
    assert _status(lab, "bob", tokens["bob"]) == "200"
    assert _status(lab, "bob", tokens["alice"]) == "403"  # alice's token does not open bob's server
    # another member cannot even reach it, let alone listen in its place
    assert _status(lab, "alice", tokens["alice"], as_user="bob") == "PermissionError"
    r = lab.host(HOST, "runuser", "-u", "bob", "--", "python3", "-c",
                 "import socket; socket.socket(socket.AF_UNIX).bind('/run/provision-jupyter/alice/x')",
                 check=False)
    assert r.returncode != 0 and "PermissionError" in r.stderr
    # bob cannot read alice's token (he has no sudo either)
    r = lab.host(HOST, "runuser", "-u", "bob", "--", "cat", f"/home/alice/{TOKEN}", check=False)
    assert r.returncode != 0 and "Permission denied" in r.stderr
    assert lab.host(HOST, "runuser", "-u", "bob", "--", "sudo", "-n", "true",
                    check=False).returncode != 0
    # alice's limits reach her process: 2G of memory, GPU 0 only
    unit = "provision-jupyter@alice.service"
    assert lab.host(HOST, "systemctl", "show", "-p", "MemoryMax", "--value",
                    unit).stdout.strip() == str(2 * 1024**3)
    pid = lab.host(HOST, "systemctl", "show", "-p", "MainPID", "--value", unit).stdout.strip()
    environ = lab.host(HOST, "cat", f"/proc/{pid}/environ").stdout.split("\0")
    assert "CUDA_VISIBLE_DEVICES=0" in environ


@pytest.mark.parametrize("backend", ["openssh", "paramiko"])
def test_bob_opens_his_server_through_his_own_tunnel(lab: Lab, team: dict[str, Any],
                                                     backend: str) -> None:
    code, doc, err = lab.provision_json("tunnel", HOST, "--user", "bob", "--check",
                                        "--backend", backend, "-i", str(team["all"]))
    assert code == 0, err + json.dumps(doc, indent=1)
    forwards = {f["service"]: f for f in doc["forwards"]}
    assert set(forwards) == {"jupyter@bob", "team-board"}  # nobody else's server
    bob = forwards["jupyter@bob"]
    token = lab.host(HOST, "cat", f"/home/bob/{TOKEN}").stdout.strip()
    assert bob["url"] == f"http://127.0.0.1:8888/?token={token}"
    assert bob["remote"] == f"{HOST}:{_socket('bob')}"  # over his login, to his socket
    # --check asked /api/status with that token through the forward: 200, not a redirect
    assert bob["answer"].split()[1] == "200", bob
    code, doc, err = lab.provision_json("tunnel", HOST, "jupyter@alice", "--user", "bob",
                                        "--check", "-i", str(team["all"]))
    assert code == 2 and "alice's own server" in err


def test_team_board_directory_is_the_groups(lab: Lab, team: dict[str, Any]) -> None:
    st = lab.host(HOST, "stat", "-c", "%a %U %G", RUNS).stdout.split()
    assert st == ["2770", "svc-team-board", "ml"]  # the service's own account
    members = lab.host(HOST, "getent", "group", "ml").stdout.strip().rsplit(":", 1)[1]
    assert set(members.split(",")) >= {"alice", "bob", "carol"}
    lab.host(HOST, "runuser", "-u", "bob", "--", "mkdir", f"{RUNS}/bob-run")
    assert lab.host(HOST, "stat", "-c", "%G", f"{RUNS}/bob-run").stdout.strip() == "ml"
    r = lab.host(HOST, "runuser", "-u", "nobody", "--", "ls", RUNS, check=False)
    assert r.returncode != 0


def test_a_member_who_leaves_loses_their_server_and_keeps_their_files(
        lab: Lab, team: dict[str, Any]) -> None:
    code, data, err = _apply(lab, team["without_carol"], team["playbook"])
    assert code == 0, err + json.dumps(data, indent=1)
    actions = [a["description"] for a in _hosts(data)[HOST]["actions"]]
    assert "systemctl disable --now provision-jupyter@carol.service (its member is no longer " \
           "listed)" in actions
    unit = "provision-jupyter@carol.service"
    assert lab.host(HOST, "systemctl", "is-active", unit, check=False).stdout.strip() != "active"
    assert lab.host(HOST, "systemctl", "is-enabled", unit, check=False).stdout.strip() != "enabled"
    assert lab.host(HOST, "test", "-s", f"/home/carol/{TOKEN}", check=False).returncode == 0
    assert "carol" not in lab.host(HOST, "getent", "group", "ml").stdout
    code, data, err = lab.provision_json("plan", HOST, "--playbook",
                                         str(team["playbook"]), "-i", str(team["without_carol"]),
                                         "--detailed-exitcode")
    assert code == 0, err + json.dumps(data, indent=1)  # and then: no changes
    assert _hosts(data)[HOST]["remote_execs"] == 1  # a no-op costs one exec, as without them
    assert _status(lab, "bob", None) == "403"  # the others run on


SQUAT = """import socket, sys, time
s = socket.socket()  # no SO_REUSEADDR: a server binding with it could not share the port
s.bind(("127.0.0.1", int(sys.argv[1])))
if sys.argv[2] == "listen":
    s.listen(8)
print("held", flush=True)
time.sleep(600)
"""


def test_on_a_loopback_port_bobs_squat_never_gets_alices_token_and_is_named(
        lab: Lab, team: dict[str, Any]) -> None:
    """per_user_socket: false puts members' servers back on loopback ports, which any
    account can take while a server is down. bob takes alice's: listening, then bound only.
    The tunnel withholds her token, apply fails naming him, audit names him (issue 34)."""
    doc = yaml.safe_load(Path(team["without_carol"]).read_text())
    doc["hosts"][HOST]["services"]["jupyter"]["per_user_socket"] = False
    tcp = Path(team["dir"]) / "inventory-tcp.yml"
    tcp.write_text(yaml.safe_dump(doc, sort_keys=False))
    code, data, err = _apply(lab, tcp, team["playbook"])
    assert code == 0, err + json.dumps(data, indent=1)
    port = next(s.port for s in load_inventory(tcp).node(HOST).services if s.member == "alice")
    bob_uid = lab.host(HOST, "id", "-u", "bob").stdout.strip()
    try:
        for how in ("listen", "bind"):
            lab.host(HOST, "systemctl", "stop", "provision-jupyter@alice.service")  # a restart
            squat = subprocess.Popen(
                ["nsenter", "-t", str(lab.leader(HOST)), "-a", "--", "runuser", "-u", "bob", "--",
                 "python3", "-c", SQUAT, str(port), how], stdout=subprocess.PIPE, text=True)
            try:
                assert squat.stdout is not None and squat.stdout.readline() == "held\n"
                code, doc, err = lab.provision_json("tunnel", HOST, "--user", "alice", "--check",
                                                    "-i", str(tcp))
                alice = next(f for f in doc["forwards"] if f["service"] == "jupyter@alice")
                # no token either way: held by bob, or held without anybody listening
                assert "token=" not in alice["url"], (how, alice)
                assert alice["status"] == ("nothing listening" if how == "bind" else
                                           f"token withheld: port {port} on the host is held by "
                                           f"uid {bob_uid}, not alice (another account listening "
                                           "in place of their server would be sent it)"), alice
                code, data, err = _apply(lab, tcp, team["playbook"])
                said = err + json.dumps(data)
                assert code == 1, (how, said)
                if how == "listen":
                    # the pid is runuser's python child; the account is bob's
                    assert ("provision-jupyter@alice.service did not start: port "
                            f"{port} is held by pid ") in said, said
                    assert "bob: python3), not by provision-jupyter@alice.service" in said, said
                    code, audit, err = lab.provision_json("audit", HOST, "-i", str(tcp))
                    found = [f for h in audit["hosts"] for f in h["findings"]]
                    held = [f for f in found if f["code"] == "member-port-held"]
                    assert held and "of bob" in held[0]["message"], found
                else:  # held without listening: her server cannot bind, and stops before it listens
                    assert "provision-jupyter@alice.service did not start" in said, said
            finally:
                # nsenter forked into the host's pid namespace: bob's process is its child
                lab.host(HOST, "pkill", "-KILL", "-u", "bob", "-f", "import socket, sys, time",
                         check=False)
                squat.kill()
                squat.wait()
    finally:
        code, data, err = _apply(lab, team["without_carol"], team["playbook"])
    assert code == 0, err + json.dumps(data, indent=1)
