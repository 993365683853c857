"""Python environments as data, on a real host: gpu1 of the session lab, a package index of
the tests' own (tests/support/package_index.py: wheels downloaded once from PyPI into a
cache, served over HTTP from the lab's mirror namespace on the private segment).

The tests run in order and share one host and one bootstrap: a host with no environment
gets Jupyter and TensorBoard from the index and serves them through a tunnel; a second run
installs nothing; a changed requirement set re-installs that env and restarts only the
service that uses it; an install that fails (a package the index does not have) fails the
host with pip's own words and leaves the previous env and its service running. The later
cases change a small third env (`web`, a plain HTTP server run by its python), so that
each re-install costs seconds, not Jupyter's hundred wheels again. The bootstrap builds
with uv on the host (linked to the project's), the later cases with pip.

The playbook is the bootstrap's python_envs and services steps (users, sshd and firewall
are other modules' subject, and their commit-confirmed runs would only add time).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.inventory.python_envs import ENVS_ROOT, PythonEnv
from tests.support import package_index as I

from .conftest import Lab, one_host_inventory
from .test_tunnel import http_get, jupyter_status, tunnel

pytestmark = pytest.mark.lab

HOST = "gpu1"
UNITS = ("provision-jupyter.service", "provision-tensorboard.service", "provision-web.service")
WEB = {"port": 8010, "venv": "web", "command": "{venv}python -m http.server --bind {bind} {port}"}
PLAYBOOK = "name: envs\nhosts: [all]\nsteps: [python_envs, services]\n"
MISSING = "provision-lab-missing"  # a package the index does not have


@dataclass
class World:
    lab: Lab
    dir: Path
    url: str
    doc: dict[str, Any]
    playbook: Path
    state: dict[str, Any]  # what the earlier tests saw, for the later ones


UV_LINK = "/usr/local/bin/uv"  # on gpu1 only, to the project's uv (bound into the container)


def cleanup(lab: Lab) -> None:
    # the envs themselves go with the lab's overlay at `lab down` (removing them here cost
    # more than a minute); the next module's units are its own
    lab.host(HOST, "sh", "-c", f"systemctl stop {' '.join(UNITS)} 2>/dev/null; rm -f {UV_LINK}",
             check=False, timeout=120)


def fresh(lab: Lab) -> None:
    cleanup(lab)
    lab.host(HOST, "rm", "-rf", ENVS_ROOT, "/var/cache/provision", check=False, timeout=300)


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    d = tmp_path_factory.mktemp("envs")
    root = I.build_index(I.wheels(("jupyterlab", "tensorboard")), d / "www")
    host_python = lab.host(HOST, "python3", "-c", "import sys; print(sys.version_info[:2])").stdout
    here = I._python_tag(I.PYTHON)
    assert here.startswith(host_python.strip()), f"the wheels are for {here}, {HOST} runs {host_python}"
    with I.mirror(lab.plan) as node, I.serve(node.netns, node.primary.ipv4, root) as url:
        fresh(lab)  # a host with no environment
        doc = one_host_inventory(lab, HOST, services={
            "jupyter": {}, "tensorboard": {"logdir": "/srv/runs"}, "web": WEB})
        # the catalog's default envs by name, from the team's mirror (here: the lab's)
        doc["python_envs"] = {"jupyterlab": {"packages": ["jupyterlab"], "index_url": url},
                              "tensorboard": {"packages": ["tensorboard"], "index_url": url},
                              "web": {"packages": ["six"], "index_url": url}}
        playbook = d / "envs.yml"
        playbook.write_text(PLAYBOOK)
        try:
            yield World(lab, d, url, doc, playbook, {})
        finally:
            cleanup(lab)


def apply(w: World, doc: dict[str, Any], *extra: str) -> tuple[int, dict[str, Any], str]:
    inv = w.dir / f"inventory-{secrets.token_hex(2)}.yml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    code, data, err = w.lab.provision_json("apply", HOST, "--yes", "-i", str(inv),
                                           "--playbook", str(w.playbook), *extra, timeout=600)
    assert data, f"no JSON (exit {code}): {err}"
    return code, next(h for h in data["hosts"] if h["host"] == HOST), err


def env(w: World, name: str, packages: list[str]) -> PythonEnv:
    return PythonEnv.of(name, packages, index_url=w.url)


def link(w: World, name: str) -> str:
    return w.lab.host(HOST, "readlink", f"{ENVS_ROOT}/{name}", check=False).stdout.strip()


def mtimes(w: World) -> str:
    return w.lab.host(HOST, "sh", "-c", f"stat -c '%n %Y' {ENVS_ROOT}/*/.provision-env.json "
                      "/var/lib/provision/pyenv-*.log").stdout


def pid(w: World, unit: str) -> str:
    out = w.lab.host(HOST, "systemctl", "show", "-p", "MainPID", "--value", unit).stdout.strip()
    assert out not in ("", "0"), f"{unit} is not running"
    return out


def wait_listening(w: World, *ports: int) -> None:
    """A started unit is not yet a listening server (Jupyter takes seconds to load)."""
    deadline = time.monotonic() + 120
    for port in ports:
        while w.lab.host(HOST, "bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}",
                         check=False).returncode != 0:
            assert time.monotonic() < deadline, w.lab.host(
                HOST, "journalctl", "-n", "30", "--no-pager", "-u", "provision-*", check=False).stdout
            time.sleep(0.5)


def answers(w: World, port: int) -> int:
    wait_listening(w, port)
    r = w.lab.host(HOST, "python3", "-c", "import urllib.request as u; "
                   f"print(u.urlopen('http://127.0.0.1:{port}/', timeout=10).status)", check=False)
    return int(r.stdout.strip() or 0)


def test_bootstrap_installs_jupyter_and_tensorboard_from_the_index(world: World, tmp_path: Path) -> None:
    """With uv on the host (the hundred wheels of Jupyter and TensorBoard cost minutes with
    pip on a loaded machine, seconds with uv); the later cases build with pip."""
    w = world
    uv = Path(w.lab.plan.venv) / "bin" / "uv"
    assert uv.exists(), f"{uv}: the project's venv has no uv (make venv installs it)"
    w.lab.host(HOST, "ln", "-sf", str(uv), UV_LINK)
    try:
        code, h, err = apply(w, w.doc)
    finally:
        w.lab.host(HOST, "rm", "-f", UV_LINK)
    assert code == 0 and h["status"] == "changed", (h, err)
    builds = [a["description"] for a in h["actions"] if a["type"] == "BuildPythonEnv"]
    assert len(builds) == 3 and all("build /opt/provision/envs/" in b and " with uv" in b
                                    for b in builds), builds
    for name, packages in (("jupyterlab", ["jupyterlab"]), ("tensorboard", ["tensorboard"]),
                           ("web", ["six"])):
        e = env(w, name, packages)
        assert link(w, name) == e.dirname
        record = w.lab.host(HOST, "cat", f"{e.path}/.provision-env.json").stdout
        assert '"installer": "uv"' in record, record
    wait_listening(w, 8888, 6006, 8010)
    w.state["pids"] = {u: pid(w, u) for u in UNITS}
    inv = w.dir / "inventory-bootstrap.yml"
    inv.write_text(yaml.safe_dump(w.doc, sort_keys=False))
    with tunnel(w.lab, tmp_path, HOST, inventory=inv) as t:
        said = [(f["service"], f["status"], f["listening"]) for f in t.doc["forwards"]]
        assert all(f["status"] == "ok" for f in t.doc["forwards"]), (said, t.stderr)
        assert jupyter_status(w.lab, t) == 200  # through the tunnel, with the host's token
        status, body = http_get(w.lab, t.forward("tensorboard")["url"])
        assert status == 200 and b"<html" in body.lower()


def test_a_second_run_installs_nothing(world: World) -> None:
    w = world
    before = mtimes(w)
    code, h, err = apply(w, w.doc)
    assert code == 0 and h["status"] == "ok" and h["changes"] == 0, (h, err)
    assert h["remote_execs"] == 1  # the probe read the records: no extra exec, no pip
    assert mtimes(w) == before  # neither a record nor an installer's log was written
    assert {u: pid(w, u) for u in UNITS} == w.state["pids"]


def test_changed_requirements_reinstall_that_env_and_restart_only_its_service(world: World) -> None:
    w = world
    old = env(w, "web", ["six"])
    others = {n: link(w, n) for n in ("jupyterlab", "tensorboard")}
    records = w.lab.host(HOST, "stat", "-c", "%Y", *(f"{ENVS_ROOT}/{d}/.provision-env.json"
                                                      for d in others.values())).stdout
    doc = yaml.safe_load(yaml.safe_dump(w.doc))
    doc["python_envs"]["web"]["packages"] = ["six>=1", "wcwidth"]
    new = env(w, "web", ["six>=1", "wcwidth"])
    code, h, err = apply(w, doc)
    assert code == 0 and h["status"] == "changed", (h, err)
    said = " ".join(a["description"] for a in h["actions"])
    assert "python env web: build" in said and "+ wcwidth; six -> six>=1" in said, said
    assert f"build {new.path} with pip" in said, said  # no uv on the host now: pip
    assert '"installer": "pip"' in w.lab.host(HOST, "cat", f"{new.path}/.provision-env.json").stdout
    assert "python env jupyterlab" not in said and "python env tensorboard" not in said
    assert link(w, "web") == new.dirname
    assert link(w, ".previous-web") == old.dirname  # kept beside it, one generation
    assert {n: link(w, n) for n in others} == others
    assert w.lab.host(HOST, "stat", "-c", "%Y", *(f"{ENVS_ROOT}/{d}/.provision-env.json"
                                                   for d in others.values())).stdout == records
    pids = {u: pid(w, u) for u in UNITS}
    restarted = {u for u in UNITS if pids[u] != w.state["pids"][u]}
    assert restarted == {"provision-web.service"}  # only the service of that env
    cmdline = w.lab.host(HOST, "cat", f"/proc/{pids['provision-web.service']}/cmdline").stdout
    assert new.path in cmdline  # the restarted service runs from the new env
    assert answers(w, 8010) == 200
    w.state["pids"], w.state["doc"] = pids, doc


def test_a_failing_install_fails_the_host_and_leaves_the_previous_env_running(world: World) -> None:
    w = world
    doc = yaml.safe_load(yaml.safe_dump(w.state["doc"]))
    doc["python_envs"]["web"]["packages"] = ["six>=1", "wcwidth", MISSING]
    current = link(w, "web")
    code, h, err = apply(w, doc)
    assert code == 1 and h["status"] == "failed", (h, err)
    assert h["error"].startswith("python env web: installing "), h["error"]
    assert f"No matching distribution found for {MISSING}" in h["error"], h["error"]  # pip's words
    assert link(w, "web") == current
    failed = env(w, "web", ["six>=1", "wcwidth", MISSING])
    assert w.lab.host(HOST, "test", "-e", failed.path, check=False).returncode != 0
    assert {u: pid(w, u) for u in UNITS} == w.state["pids"]  # nothing restarted
    assert answers(w, 8010) == 200
    # and it is still to do: the next plan builds it again (nothing recorded it as done)
    inv = w.dir / "inventory-failing.yml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    _, data, err = w.lab.provision_json("plan", HOST, "-i", str(inv), "--playbook", str(w.playbook))
    planned = [a["description"] for hh in data.get("hosts", []) for a in hh["actions"]]
    assert any(a.startswith("python env web: build") for a in planned), (data, err)
