"""`provision tunnel` against real Jupyter Server and TensorBoard on gpu1, through the bastion.

Both backends run the same tests. The services are the systemd units `render_host` renders
for gpu1, installed over SSH as admin with sudo.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import select
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.inventory import load_inventory
from provision.render import render_host

from .conftest import PROVISION, Lab

pytestmark = pytest.mark.lab

BACKENDS = ["openssh", "paramiko"]


# --- fixtures ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def services(lab: Lab) -> Lab:
    """Jupyter and TensorBoard running on gpu1 from the rendered units, bound to 127.0.0.1."""
    inv = load_inventory(lab.inventory)
    gpu1 = inv.node("gpu1")
    artifacts = [a for a in render_host(inv, gpu1)
                 if a.kind == "jupyter-config"
                 or (a.kind == "unit" and a.service in {s.unit_name for s in gpu1.tunnel_services})]
    assert {a.kind for a in artifacts} == {"unit", "jupyter-config"}
    script = ["set -e", "install -d -o admin -g admin /srv/runs"]
    # the services' own accounts (the services step makes them; this module installs alone)
    script += [f"id -u {s.user} >/dev/null 2>&1 || useradd -r -m -d /var/lib/provision-services/"
               f"{s.user} -s /usr/sbin/nologin {s.user}"
               for s in gpu1.tunnel_services if s.own_account]
    for a in artifacts:
        payload = base64.b64encode(a.content.encode()).decode()
        script += [f"install -d {shlex.quote(os.path.dirname(a.path))}",
                   f"echo {payload} | base64 -d > {shlex.quote(a.path)}",
                   f"chmod {a.mode:o} {shlex.quote(a.path)}"]
    units = " ".join(s.unit_name for s in gpu1.tunnel_services)  # not the public model API
    script += ["systemctl daemon-reload", f"systemctl restart {units}"]
    lab.ssh("gpu1", "sudo", "-n", "sh", "-c", "\n".join(script))
    deadline = time.monotonic() + 90
    for svc in gpu1.tunnel_services:
        check = f"exec 3<>/dev/tcp/127.0.0.1/{svc.port}"
        while lab.host("gpu1", "bash", "-c", check, check=False).returncode != 0:
            assert time.monotonic() < deadline, lab.host(
                "gpu1", "journalctl", "-n", "50", "--no-pager", "-u", svc.unit_name, check=False).stdout
            time.sleep(0.5)
    return lab


@dataclass
class Tunnel:
    proc: subprocess.Popen[bytes]
    doc: dict[str, Any]
    stderr_path: Path

    def forward(self, service: str) -> dict[str, Any]:
        return next(f for f in self.doc["forwards"] if f["service"] == service)

    def port(self, service: str) -> int:
        return int(self.forward(service)["local"].rsplit(":", 1)[1])

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()


def _argv(lab: Lab, *args: str, inventory: Path | None = None) -> list[str]:
    return ["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, "tunnel", "-i",
            str(inventory or lab.inventory), *args]


@contextlib.contextmanager
def tunnel(lab: Lab, tmp_path: Path, *args: str, inventory: Path | None = None) -> Iterator[Tunnel]:
    """`provision tunnel … --json` in the operator namespace; SIGINT and reaped on exit."""
    err = tmp_path / f"tunnel-{time.monotonic_ns()}.err"
    with err.open("w") as errf:
        proc = subprocess.Popen(_argv(lab, *args, "--json", inventory=inventory),
                                stdout=subprocess.PIPE, stderr=errf)
    try:
        assert proc.stdout is not None
        fd, text, deadline = proc.stdout.fileno(), b"", time.monotonic() + 30
        while not text.endswith(b"\n}\n"):
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"no JSON from provision tunnel within 30s\n{err.read_text()}"
            chunk = os.read(fd, 65536)
            assert chunk, f"provision tunnel exited {proc.wait()}\n{err.read_text()}"
            text += chunk
        yield Tunnel(proc, json.loads(text), err)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def http_get(lab: Lab, url: str, timeout: float = 10) -> tuple[int, bytes]:
    with lab.operator_netns():
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()


def listeners(lab: Lab, port: int) -> list[str]:
    """Local addresses of sockets listening on `port` in the operator namespace."""
    out = lab.op("ss", "-Hltn", f"sport = :{port}").stdout
    return [line.split()[3] for line in out.splitlines() if line.strip()]


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def jupyter_status(lab: Lab, t: Tunnel) -> int:
    url = t.forward("jupyter")["url"]
    token = re.search(r"token=([^&]+)", url)
    assert token, f"no token in {url}"
    try:
        return http_get(lab, f"http://{t.forward('jupyter')['local']}/api/status?token={token.group(1)}",
                        timeout=5)[0]
    except OSError:
        return 0


# --- tests ---------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_tunnel_reaches_jupyter_and_tensorboard(services: Lab, tmp_path: Path, backend: str) -> None:
    lab = services
    with tunnel(lab, tmp_path, "gpu1", "--backend", backend) as t:
        assert t.doc["backend"] == backend
        assert {f["service"] for f in t.doc["forwards"]} == {"jupyter", "tensorboard"}
        assert all(f["status"] == "ok" for f in t.doc["forwards"]), t.doc
        # Jupyter: the printed URL carries the token read on the host; the API answers with it
        assert "token=" in t.forward("jupyter")["url"]
        assert jupyter_status(lab, t) == 200
        no_token = http_get(lab, f"http://{t.forward('jupyter')['local']}/api/status")[0]
        assert no_token == 403
        # TensorBoard: the plain URL serves its index page
        status, body = http_get(lab, t.forward("tensorboard")["url"])
        assert status == 200 and b"<html" in body.lower()
        # listeners bind 127.0.0.1 only: nothing on the operator's lab address
        for name in ("jupyter", "tensorboard"):
            assert listeners(lab, t.port(name)) == [f"127.0.0.1:{t.port(name)}"]
            outside = lab.op("bash", "-c", f"exec 3<>/dev/tcp/{lab.addr('operator')}/{t.port(name)}",
                             check=False)
            assert outside.returncode != 0
    # the services themselves are not reachable from the bastion
    for port in (8888, 6006):
        r = lab.ssh("bastion", "bash", "-c", f"timeout 3 bash -c 'exec 3<>/dev/tcp/{lab.addr('gpu1')}/{port}'",
                    check=False)
        assert r.returncode != 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_busy_local_port_picks_another(services: Lab, tmp_path: Path, backend: str) -> None:
    lab = services
    with lab.operator_netns():
        squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT of earlier tests
        squatter.bind(("127.0.0.1", 8888))
        squatter.listen(1)
        with tunnel(lab, tmp_path, "gpu1", "jupyter", "--backend", backend) as t:
            port = t.port("jupyter")
            assert port != 8888
            assert f"local port 8888 is busy, using {port}" in t.stderr
            assert f":{port}/" in t.forward("jupyter")["url"]
            assert jupyter_status(lab, t) == 200
    finally:
        squatter.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_reconnects_after_the_link_is_cut(services: Lab, tmp_path: Path, backend: str) -> None:
    """iptables on the bastion drops SSH for longer than the keepalive window, then lets go."""
    lab = services
    rule = ["INPUT", "-p", "tcp", "--dport", "22", "-j", "DROP"]
    with tunnel(lab, tmp_path, "gpu1", "jupyter", "--backend", backend, "--keepalive", "1") as t:
        assert jupyter_status(lab, t) == 200
        lab.host("bastion", "iptables", "-I", *rule)
        try:
            wait_for(lambda: "link lost" in t.stderr, 30, "the dead link to be noticed")
        finally:
            lab.host("bastion", "iptables", "-D", *rule)
        wait_for(lambda: "reconnected" in t.stderr, 60, f"a reconnect\n{t.stderr}")
        assert jupyter_status(lab, t) == 200
        assert t.proc.poll() is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_reconnects_after_bastion_sshd_restart(services: Lab, tmp_path: Path, backend: str) -> None:
    """sshd restarted on the bastion and its open sessions killed: the tunnel comes back."""
    lab = services
    with tunnel(lab, tmp_path, "gpu1", "tensorboard", "--backend", backend, "--keepalive", "2") as t:
        assert http_get(lab, t.forward("tensorboard")["url"])[0] == 200
        sessions = lab.host("bastion", "ss", "-Htnp", "state", "established", "( sport = :22 )").stdout
        pids = sorted(set(re.findall(r"pid=(\d+)", sessions)))
        assert pids, sessions
        lab.host("bastion", "systemctl", "restart", "ssh")
        # a session may end on its own between the listing and the kill (check=False); the
        # reconnect below is what proves the tunnel's own session went
        lab.host("bastion", "kill", *pids, check=False)
        wait_for(lambda: "reconnected" in t.stderr, 60, f"a reconnect\n{t.stderr}")
        assert http_get(lab, t.forward("tensorboard")["url"])[0] == 200


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigint_leaves_nothing_behind(services: Lab, tmp_path: Path, backend: str) -> None:
    lab = services
    with tunnel(lab, tmp_path, "gpu1", "--backend", backend) as t:
        ports = [t.port("jupyter"), t.port("tensorboard")]
        assert all(listeners(lab, p) for p in ports)
        t.proc.send_signal(signal.SIGINT)
        assert t.proc.wait(timeout=15) == 0
    for p in ports:
        assert listeners(lab, p) == []
    spec = re.compile(rf"127\.0\.0\.1:({'|'.join(map(str, ports))}):")
    leftovers = [line for line in subprocess.run(["ps", "-eo", "pid,args"], capture_output=True,
                                                 text=True, check=True).stdout.splitlines()
                 if spec.search(line)]
    assert leftovers == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("unknown", ["bastion", "gpu1"])
def test_unknown_host_key_is_refused(services: Lab, tmp_path: Path, backend: str, unknown: str) -> None:
    lab = services
    known = tmp_path / "known_hosts"
    kept = [ln for ln in lab.known_hosts.read_text().splitlines()
            if ln.strip() and ln.split()[0].split(",")[0] != unknown]
    known.write_text("\n".join(kept) + "\n")
    inv = tmp_path / "inventory.yml"
    inv.write_text(lab.inventory.read_text().replace(str(lab.known_hosts), str(known)))
    r = subprocess.run(_argv(lab, "gpu1", "--backend", backend, "--check", inventory=inv),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "host key" in r.stderr.lower() and "refusing" in r.stderr
    assert f"({unknown})" in r.stderr or f"{unknown} (" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("refuses", ["bastion", "gpu1"])
def test_a_refused_key_names_the_hop_and_the_key(lab: Lab, tmp_path: Path, backend: str,
                                                 refuses: str) -> None:
    """Both backends say which hop of the chain refused the login and the key offered there
    (the OpenSSH one said only "authentication failed (permission denied)")."""
    key = tmp_path / "not-authorized"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    doc = yaml.safe_load(lab.inventory.read_text())
    doc["bastions" if refuses == "bastion" else "hosts"][refuses]["identity_file"] = str(key)
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump(doc))
    r = subprocess.run(_argv(lab, "gpu1", "--backend", backend, "--check", inventory=inv),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    node = doc["bastions" if refuses == "bastion" else "hosts"][refuses]
    assert (f"{refuses} ({node['address']}:{node.get('port', 22)}): authentication failed as "
            f"{node.get('user') or doc['defaults']['user']} (tried: {key})") in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_check_mode_and_nothing_listening(services: Lab, tmp_path: Path) -> None:
    lab = services
    r = subprocess.run(_argv(lab, "gpu1", "--check", "--json"), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert all(f["answer"].startswith("HTTP/") for f in doc["forwards"])
    lab.ssh("gpu1", "sudo", "-n", "systemctl", "stop", "provision-tensorboard.service")
    try:
        r = subprocess.run(_argv(lab, "gpu1", "--check"), capture_output=True, text=True, timeout=60)
        assert r.returncode == 1
        assert "tensorboard: nothing listening on 127.0.0.1:6006 on gpu1" in r.stderr
    finally:
        lab.ssh("gpu1", "sudo", "-n", "systemctl", "start", "provision-tensorboard.service")


def test_ssh_and_sync_through_the_chain(services: Lab, tmp_path: Path) -> None:
    lab = services
    base = ["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION]
    r = subprocess.run([*base, "ssh", "-i", str(lab.inventory), "gpu1", "--", "hostname"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and r.stdout.strip() == "gpu1", r.stderr
    lab.ssh("gpu1", "sh", "-c", "mkdir -p ckpt && echo weights > ckpt/model.pt")
    dest = tmp_path / "ckpt"
    r = subprocess.run([*base, "sync", "-i", str(lab.inventory), "gpu1:ckpt/", f"{dest}/"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (dest / "model.pt").read_text() == "weights\n"


BLOB_PORT = 9997


@pytest.fixture(scope="module")
def blob(services: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A 24 MiB random file served on gpu1's 127.0.0.1, an inventory that declares it, its sha256."""
    lab = services
    lab.host("gpu1", "sh", "-c",
             "set -e; mkdir -p /var/tmp/blob; head -c 25165824 /dev/urandom > /var/tmp/blob/blob; "
             "systemctl stop provision-test-blob.service 2>/dev/null || true; "
             "systemd-run --quiet --unit=provision-test-blob --property=User=admin "
             f"/usr/bin/python3 -m http.server {BLOB_PORT} --bind 127.0.0.1 --directory /var/tmp/blob")
    digest = lab.host("gpu1", "sha256sum", "/var/tmp/blob/blob").stdout.split()[0]
    wait_for(lambda: lab.host("gpu1", "bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{BLOB_PORT}",
                              check=False).returncode == 0, 30, "the blob server")
    doc = yaml.safe_load(lab.inventory.read_text())
    doc["hosts"]["gpu1"].setdefault("services", {})["blob"] = {
        "port": BLOB_PORT, "command": "/usr/bin/python3 -m http.server {port} --bind {bind}"}
    inv = tmp_path_factory.mktemp("blob") / "inventory.yml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    yield inv, digest
    lab.host("gpu1", "systemctl", "stop", "provision-test-blob.service", check=False)
    lab.host("gpu1", "rm", "-rf", "/var/tmp/blob", check=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_large_transfer_with_a_slow_reader_arrives_intact(
        services: Lab, blob: tuple[Path, str], tmp_path: Path, backend: str) -> None:
    """The reader waits before reading, so each hop queues a full window behind it."""
    lab = services
    inv, digest = blob
    with tunnel(lab, tmp_path, "gpu1", "blob", "--backend", backend, inventory=inv) as t:
        fetch = ("import hashlib, socket, sys, time\n"
                 f"s = socket.create_connection(('127.0.0.1', {t.port('blob')}))\n"
                 "s.sendall(b'GET /blob HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n')\n"
                 "time.sleep(2)\n"
                 "data = b''.join(iter(lambda: s.recv(1 << 16), b''))\n"
                 "head, _, body = data.partition(b'\\r\\n\\r\\n')\n"
                 "print(len(body), hashlib.sha256(body).hexdigest())\n")
        r = lab.op(sys.executable, "-c", fetch, timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == [str(24 * 1024 * 1024), digest], t.stderr
