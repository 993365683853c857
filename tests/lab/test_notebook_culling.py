"""An idle kernel in a member's Jupyter is culled (issue 38, item 5): on the lab's gpu1, bob
gets his own Jupyter Server from the operator's venv (jupyter-server and ipykernel, bound
read-only into every lab host) with `culling: {idle_timeout: 4, interval: 1}`; a kernel
started through the server's REST API (over bob's socket, with his token, as
tests/lab/test_team_notebooks.py talks to it) is gone from /api/kernels once idle past the
timeout, and the server's log says it culled that kernel. Polled with a deadline, never a
fixed sleep: the culler's interval and a busy machine set the time, the log the mechanism.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from .conftest import Lab, one_host_inventory

pytestmark = pytest.mark.lab

HOST = "gpu1"
MEMBER = "bob"
UNIT = f"provision-jupyter@{MEMBER}.service"
SOCKET = f"/run/provision-jupyter/{MEMBER}/jupyter.sock"
TOKEN = f"/home/{MEMBER}/.local/share/provision/jupyter-token"
PLAYBOOK = "name: notebooks\nhosts: [all]\nsteps: [users, services]\n"
IDLE = 4  # seconds

# One request to the member's server over its Unix socket: METHOD PATH -> "STATUS BODY"
REQUEST = """import http.client, socket, sys
class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(30)
        self.sock.connect(sys.argv[1])
c = Unix("localhost", timeout=30)
c.request(sys.argv[2], sys.argv[3], body=sys.argv[5] if len(sys.argv) > 5 else None,
          headers={"Authorization": "token " + open(sys.argv[4]).read().strip(),
                   "Content-Type": "application/json"})
r = c.getresponse()
print(r.status, r.read().decode())
"""


def _api(lab: Lab, method: str, path: str, body: str | None = None) -> tuple[int, Any]:
    # root reaches every member's socket; the token is bob's own, read from his home
    out = lab.host(HOST, "python3", "-c", REQUEST, SOCKET, method, path, TOKEN,
                   *([body] if body is not None else []), timeout=60).stdout
    status, _, text = out.strip().partition(" ")
    return int(status), json.loads(text) if text else None


def _cleanup(lab: Lab) -> None:
    lab.host(HOST, "sh", "-c", f"systemctl disable --now {UNIT}; rm -rf "
             "/etc/systemd/system/provision-jupyter@* /etc/provision/jupyter/jupyter@*; "
             "systemctl daemon-reload", check=False)


@pytest.fixture(scope="module")
def server(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    d = tmp_path_factory.mktemp("culling")
    doc = one_host_inventory(lab, HOST, services={
        "jupyter": {"venv": lab.plan.venv, "per_user": [MEMBER],
                    "culling": {"idle_timeout": IDLE, "interval": 1}}})
    inventory, playbook = d / "inventory.yml", d / "notebooks.yml"
    inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
    playbook.write_text(PLAYBOOK)
    _cleanup(lab)
    code, data, err = lab.provision_json("apply", HOST, "--yes", "--playbook", str(playbook),
                                         "-i", str(inventory))
    assert code == 0, err + json.dumps(data, indent=1)
    deadline = time.monotonic() + 60
    while lab.host(HOST, "test", "-S", SOCKET, check=False).returncode != 0:
        assert time.monotonic() < deadline, lab.host(
            HOST, "journalctl", "-n", "30", "--no-pager", "-u", UNIT, check=False).stdout
        time.sleep(0.25)
    yield
    _cleanup(lab)


def test_the_rendered_config_culls_idle_kernels(lab: Lab, server: None) -> None:
    config = lab.host(HOST, "cat", f"/etc/provision/jupyter/jupyter@{MEMBER}/"
                                   "jupyter_server_config.py").stdout
    assert f"c.MappingKernelManager.cull_idle_timeout = {IDLE}" in config
    assert "c.MappingKernelManager.cull_connected = True" in config


def test_an_idle_kernel_is_culled_after_its_timeout(lab: Lab, server: None) -> None:
    status, kernel = _api(lab, "POST", "/api/kernels", json.dumps({"name": "python3"}))
    assert status == 201, kernel
    kid = kernel["id"]
    status, kernels = _api(lab, "GET", "/api/kernels")
    assert status == 200 and kid in [k["id"] for k in kernels], kernels
    # a kernel of bob's: its process runs as bob
    ps = lab.host(HOST, "ps", "-eo", "user=,args=").stdout
    assert any(line.split()[0] == MEMBER and "ipykernel" in line for line in ps.splitlines()), ps
    started = time.monotonic()
    deadline = started + 120
    while True:
        status, kernels = _api(lab, "GET", "/api/kernels")
        assert status == 200, kernels
        if kid not in [k["id"] for k in kernels]:
            break
        assert time.monotonic() < deadline, f"kernel {kid} still there: {kernels}"
        time.sleep(0.5)
    gone = time.monotonic() - started
    # the mechanism: the server's culler shut it down, for its inactivity
    log = lab.host(HOST, "journalctl", "--no-pager", "-o", "cat", "-u", UNIT).stdout
    culled = [ln for ln in log.splitlines() if "Culling" in ln and kid in ln]
    assert culled and "inactivity" in culled[0], log[-3000:]
    # how long it took is the culler's interval and the machine's load: said, not asserted
    print(f"kernel culled {gone:.1f} s after it was seen running (idle timeout {IDLE} s)")
