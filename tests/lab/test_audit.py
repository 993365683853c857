"""`provision audit` against the lab's real hosts (bastion, gpu1, gpu2) after a bootstrap.

The module bootstraps the lab with its own inventory (`apply --yes`), then plants on gpu1,
one at a time, what audit must find: an undeclared `python3 -m http.server` on 0.0.0.0:9999
(first dropped by the firewall, then opened by hand in iptables), a stopped declared service,
a server that never closes 300 connections a client made to it on gpu1's loopback, a flushed
v6 chain, a Jupyter Server without a token. Every plant is a transient systemd unit with a
RuntimeMaxSec (it stops by itself), and each test removes what it planted (units stopped,
rules restored by running provision-firewall on the host); the last test proves the lab
audits clean again. At the end the Jupyter and TensorBoard units the bootstrap added are
stopped and removed (so later modules find ports 8888 and 6006 free, as in a fresh lab).

All traffic stays inside the lab: the CLOSE_WAIT client and server both run on gpu1
(127.0.0.1), the reachability checks go from the bastion to gpu1's private address.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import PROVISION, Lab

pytestmark = pytest.mark.lab

HOST = "gpu1"
NODES = ("bastion", "gpu1", "gpu2")
PLANT = "audit-plant-9999"
LEAKY = "audit-leaky-server"
JUPYTER = "audit-jupyter-open"
HOSTILE_NAME = "audit-hostile-name"
HAND_RULE = ("-p", "tcp", "--dport", "9999", "-j", "ACCEPT")

LEAKY_SERVER = """\
import ctypes, socket, time
ctypes.CDLL(None).prctl(15, b"leaky-server", 0, 0, 0)  # PR_SET_NAME: what ss shows
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9998))
s.listen(512)
s.settimeout(0.5)
held, end = [], time.monotonic() + 120
while time.monotonic() < end:  # accepts, never closes; exits by itself
    try:
        held.append(s.accept()[0])
    except OSError:
        pass
"""
CLIENT = """\
import socket, time
cs = [socket.create_connection(("127.0.0.1", 9998), timeout=5) for _ in range(300)]
time.sleep(0.5)
for c in cs:
    c.close()
"""


GPUS = ("gpu1", "gpu2")
SERVICES = ("provision-jupyter.service", "provision-tensorboard.service")
SERVICE_PATHS = ("/etc/provision/jupyter/jupyter", "/srv/runs")


@pytest.fixture(scope="module")
def world(lab: Lab) -> Iterator[dict[str, Any]]:
    # What the bootstrap adds that other modules would trip over (Jupyter on 8888 and
    # TensorBoard on 6006, running), removed again at the end unless it was there before.
    # Accounts, keys, the sshd drop-in and the firewall stay: the converge and harden
    # modules set those up (or undo them) themselves.
    before = {h: lab.host(h, "sh", "-c", " ".join(f"test -e /etc/systemd/system/{u} && echo {u};"
                                                    for u in SERVICES), check=False).stdout.split()
              for h in GPUS}
    code, data, err = lab.provision_json("apply", "--yes", "-i", str(lab.inventory))
    assert code == 0, err + json.dumps(data, indent=1)
    for h in GPUS:  # systemd starts the services asynchronously
        for port in (8888, 6006):
            assert listening(lab, h, port), f"{h}:{port} never listened"
    yield {"inventory": str(lab.inventory)}
    _cleanup(lab)
    for h in GPUS:
        added = [u for u in SERVICES if u not in before[h]]
        if added:
            lab.host(h, "sh", "-c", f"systemctl disable --now {' '.join(added)}; "
                     f"cd /etc/systemd/system && rm -f {' '.join(added)}; systemctl daemon-reload; "
                     + ("" if before[h] else f"rm -rf {' '.join(SERVICE_PATHS)}"), check=False)


def _cleanup(lab: Lab) -> None:
    for unit in (PLANT, LEAKY, JUPYTER, HOSTILE_NAME):
        lab.host(HOST, "systemctl", "stop", unit, check=False)
    lab.host(HOST, "systemctl", "start", "provision-tensorboard.service", check=False)
    lab.host(HOST, "/usr/local/sbin/provision-firewall", check=False)


def listening(lab: Lab, host: str, port: int, want: bool = True, timeout: float = 90) -> bool:
    """Wait until something listens on `port` (or nothing, with want=False); Jupyter takes a
    few seconds to start, much longer on a loaded machine."""
    deadline = time.monotonic() + timeout
    while True:
        out = lab.host(host, "ss", "-Htln").stdout
        if any(f":{port} " in ln for ln in out.splitlines()) == want:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


def audit(lab: Lab, *hosts: str) -> tuple[int, dict[str, Any], str]:
    return lab.provision_json("audit", "-i", str(lab.inventory), *hosts)


def host_json(data: dict[str, Any], name: str = HOST) -> dict[str, Any]:
    (h,) = [h for h in data["hosts"] if h["host"] == name]
    return h  # type: ignore[no-any-return]


def found(data: dict[str, Any], code: str, name: str = HOST) -> list[dict[str, Any]]:
    return [f for f in host_json(data, name)["findings"] if f["code"] == code]


def reach(lab: Lab, src: str, address: str, port: int) -> bool:
    probe = ("import socket,sys\n"
             f"try:\n socket.create_connection(({address!r}, {port}), timeout=2).close()\n"
             "except OSError:\n sys.exit(1)\n")
    return lab.host(src, "python3", "-c", probe, check=False).returncode == 0


def run_unit(lab: Lab, unit: str, *cmd: str, env: tuple[str, ...] = ()) -> None:
    lab.host(HOST, "systemd-run", f"--unit={unit}", "--property=RuntimeMaxSec=180",
             *(f"--setenv={e}" for e in env), *cmd)


# --- the tests, in order -------------------------------------------------------------------

def test_clean_bootstrapped_lab_audits_clean(lab: Lab, world: dict[str, Any]) -> None:
    code, data, err = audit(lab)
    assert code == 0, err + json.dumps(data, indent=1)
    assert [h["host"] for h in data["hosts"]] == list(NODES)
    for h in data["hosts"]:
        bad = [f for f in h["findings"] if f["severity"] != "info"]
        assert h["status"] == "ok" and bad == [] and h["drift"] == [], (h["host"], bad, h["drift"])
        assert h["remote_execs"] == 1  # one probe per host
    ports = {p["port"]: p for p in host_json(data)["ports"]}
    # 22: the bastion and gpu2, gpu1's peer in the lab's cluster (both declared)
    assert ports[22]["reach"] == "declared" and ports[8888]["reach"] == "host" and ports[8888]["tunnel"]
    # the public model API: the world reaches its door, the service itself only loopback
    assert ports[443]["reach"] == "internet" and "the door of model-api" in ports[443]["declared"]
    assert ports[8000]["reach"] == "host"
    assert {p["port"]: p["reach"] for p in host_json(data, "bastion")["ports"]} == {22: "declared"}
    # one model: the declared layer is what `check` reports for the same inventory
    r = lab.op(*PROVISION, "check", "-i", world["inventory"], "--json", check=False)
    checked = [{k: v for k, v in f.items() if k != "location"} for f in json.loads(r.stdout)["findings"]]
    assert checked == data["declared"]
    # the text report: one summary line per host
    r = lab.op(*PROVISION, "audit", "-i", world["inventory"], check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    for h in NODES:
        assert any(ln.startswith(f"{h}: ok") for ln in r.stdout.splitlines()), r.stdout


def test_undeclared_listener_is_a_warning_until_opened_by_hand(lab: Lab, world: dict[str, Any]) -> None:
    addr = lab.addr(HOST, "prv")
    try:
        run_unit(lab, PLANT, "/usr/bin/python3", "-m", "http.server", "9999", "--bind", "0.0.0.0")
        assert listening(lab, HOST, 9999)
        code, data, err = audit(lab, HOST)
        assert code == 0, err + json.dumps(data, indent=1)
        # gpu2, gpu1's peer in the lab's cluster `train` (every port), reaches it; nobody else
        (f,) = found(data, "undeclared-listener-cluster")
        assert f["severity"] == "warning" and f["subject"] == "gpu1:9999/tcp" and "python3" in f["message"]
        assert "cluster train only" in f["message"] and lab.addr("gpu2") in f["message"]
        assert not reach(lab, "bastion", addr, 9999)

        lab.host(HOST, "iptables", "-w", "-I", "PROVISION-INPUT", "1", *HAND_RULE)
        assert reach(lab, "bastion", addr, 9999)  # really open now
        code, data, err = audit(lab, HOST)
        assert code == 1, err + json.dumps(data, indent=1)
        (f,) = found(data, "undeclared-listener-exposed")
        assert f["severity"] == "error" and "0.0.0.0/0" in f["message"]
        (d,) = host_json(data)["drift"]
        assert (d["kind"], d["family"], d["chain"]) == ("extra-rule", 4, "PROVISION-INPUT")
        assert "--dport 9999" in d["rule"] and "-j ACCEPT" in d["rule"]
        port = next(p for p in host_json(data)["ports"] if p["port"] == 9999)
        assert port["reach"] == "internet" and port["process"] == "python3"
        r = lab.op(*PROVISION, "audit", "-i", world["inventory"], HOST, check=False)
        assert r.returncode == 1
        text = " ".join(r.stdout.split())  # rich folds long cells
        assert "rule added by hand to PROVISION-INPUT (IPv4)" in text and "--dport 9999" in text
        assert "gpu1: error" in text
    finally:
        lab.host(HOST, "systemctl", "stop", PLANT, check=False)
        lab.host(HOST, "/usr/local/sbin/provision-firewall")
    assert not reach(lab, "bastion", addr, 9999)


def test_stopped_declared_service_is_not_listening(lab: Lab, world: dict[str, Any]) -> None:
    try:
        lab.host(HOST, "systemctl", "stop", "provision-tensorboard.service")
        assert listening(lab, HOST, 6006, want=False)
        code, data, err = audit(lab, HOST)
        (f,) = found(data, "not-listening")
        assert f["subject"] == "gpu1/tensorboard" and "6006" in f["message"], err
        assert code == 0  # a warning
    finally:
        lab.host(HOST, "systemctl", "start", "provision-tensorboard.service")
    assert listening(lab, HOST, 6006)


def test_close_wait_pile_is_flagged_with_the_process(lab: Lab, world: dict[str, Any]) -> None:
    try:
        run_unit(lab, LEAKY, "/usr/bin/python3", "-c", LEAKY_SERVER)
        assert listening(lab, HOST, 9998)
        lab.host(HOST, "timeout", "60", "/usr/bin/python3", "-c", CLIENT)
        for _ in range(50):
            if lab.host(HOST, "ss", "-Htan", "state", "close-wait").stdout.count("\n") >= 300:
                break
            time.sleep(0.1)
        _, data, err = audit(lab, HOST)
        (f,) = found(data, "close-wait-pile")
        assert "leaky-server" in f["message"] and "300" in f["message"] and f["fix"], err
        cw = host_json(data)["sockets"]["close_wait"]
        assert cw[0]["process"] == "leaky-server" and cw[0]["sockets"] == 300
        assert host_json(data)["sockets"]["states"]["CLOSE-WAIT"] >= 300
    finally:
        lab.host(HOST, "systemctl", "stop", LEAKY, check=False)


def test_v6_only_hole_is_reported_though_v4_is_tight(lab: Lab, world: dict[str, Any]) -> None:
    try:
        lab.host(HOST, "ip6tables", "-w", "-F", "PROVISION-INPUT")
        code, data, err = audit(lab, HOST)
        assert code == 1, err + json.dumps(data, indent=1)
        h = host_json(data)
        assert [(d["kind"], d["family"]) for d in h["drift"]] == [("flushed", 6)]
        ssh = next(p for p in h["ports"] if p["port"] == 22)
        # v4: the bastion and gpu2, its peer in the lab's cluster (every port, both declared)
        assert ssh["v4"]["reach"] == "declared" and ssh["v6"]["reach"] == "internet"
        (f,) = found(data, "exposed-beyond-declared")
        assert "IPv6 from ::/0" in f["message"] and "IPv4 from 10." in f["message"]
        assert found(data, "firewall-flushed")[0]["severity"] == "error"
    finally:
        lab.host(HOST, "/usr/local/sbin/provision-firewall")


def test_jupyter_without_a_token_is_an_error(lab: Lab, world: dict[str, Any]) -> None:
    jupyter = f"{lab.state['venv']}/bin/jupyter"
    try:
        run_unit(lab, JUPYTER, jupyter, "server", "--allow-root", "--ServerApp.ip=127.0.0.1",
                 "--ServerApp.port=8899", "--IdentityProvider.token=", "--ServerApp.open_browser=False",
                 "--ServerApp.root_dir=/root", env=("HOME=/root",))
        assert listening(lab, HOST, 8899)
        code, data, err = audit(lab, HOST)
        assert code == 1, err + json.dumps(data, indent=1)
        (f,) = found(data, "jupyter-no-token")
        assert f["severity"] == "error" and "8899" in f["message"]
        # the declared Jupyter (rendered config, with a token) is not flagged
        assert all("8888" not in g["message"] for g in found(data, "jupyter-no-token"))
    finally:
        lab.host(HOST, "systemctl", "stop", JUPYTER, check=False)


def test_a_hostile_process_name_reaches_the_terminal_escaped(lab: Lab, world: dict[str, Any]) -> None:
    """Any local user names their processes: one named with an OSC 52 clipboard write shows
    in the real `provision audit` output (a console that believes it is a terminal) as
    escaped text, and nowhere raw."""
    import re

    from provision.text import is_unsafe

    comm = b"\x1b]52;c;eA==\x07"  # fits TASK_COMM_LEN
    server = ("import ctypes, socket, time\n"
              f"ctypes.CDLL(None).prctl(15, {comm!r}, 0, 0, 0)\n"
              "s = socket.socket()\n"
              "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
              "s.bind(('127.0.0.1', 9997))\n"
              "s.listen(1)\n"
              "time.sleep(170)\n")
    try:
        run_unit(lab, HOSTILE_NAME, "/usr/bin/python3", "-c", server)
        assert listening(lab, HOST, 9997)
        r = lab.op("env", "TTY_COMPATIBLE=1", "FORCE_COLOR=1", "COLUMNS=1000", *PROVISION, "audit",
                   "-i", world["inventory"], HOST, check=False, timeout=240)
        out = r.stdout + r.stderr
        plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
        assert "9997/tcp" in plain, out
        assert not [c for c in plain if c != "\n" and is_unsafe(c)], repr(out[-2000:])
        assert "\\x1b]52;c;eA==\\x07" in plain, plain[-2000:]
    finally:
        lab.host(HOST, "systemctl", "stop", HOSTILE_NAME, check=False)


def test_the_lab_audits_clean_again(lab: Lab, world: dict[str, Any]) -> None:
    _cleanup(lab)
    assert listening(lab, HOST, 6006) and listening(lab, HOST, 8888)
    assert listening(lab, HOST, 8899, want=False) and listening(lab, HOST, 9999, want=False)
    code, data, err = audit(lab)
    assert code == 0, err + json.dumps(data, indent=1)
    for h in data["hosts"]:
        assert [f for f in h["findings"] if f["severity"] != "info"] == [] and h["drift"] == []
