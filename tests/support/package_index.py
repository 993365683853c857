"""A Python package index of the tests' own, for the lab (modelled on tests/lab/apt_repo.py).

Wheels are downloaded once from PyPI (`pip download --only-binary=:all:`, by the Python the
lab hosts run: they boot over this machine's `/`) into a cache that survives between runs,
keyed by the requirement set (`~/.cache/provision-test-wheels/KEY`). They are laid out as a
PEP 503 simple index and served by http.server in the lab's mirror namespace on the private
segment, the only place the GPU hosts can reach (nothing routes from them to the operator).
The default lab has no mirror namespace (only `--image cloud` makes one): `mirror` adds it to
the lab's switch for the time of a test module and removes it after.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from provision.lab import plan as P
from tests.support.netns_http import serve_directory

PYTHON = "/usr/bin/python3"  # the lab hosts' python3
PYPI = "https://pypi.org/simple"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "provision-test-wheels"


def _python_tag(python: str) -> str:
    r = subprocess.run([python, "-c", "import sys, sysconfig; print(sys.version_info[:2], "
                        "sysconfig.get_platform())"], capture_output=True, text=True, check=True,
                       timeout=30)
    return r.stdout.strip()


def wheels(requirements: tuple[str, ...], python: str = PYTHON) -> Path:
    """The directory of every wheel `requirements` need on `python` (downloaded once)."""
    key = hashlib.sha256(json.dumps([_python_tag(python), sorted(requirements)]).encode()).hexdigest()[:16]
    done = CACHE / key
    if (done / ".complete").exists():
        return done
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = CACHE / f".{key}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    # this machine's pip configuration (extra indexes, constraints) stays out of it
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PIP_")},
           "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    r = subprocess.run([python, "-m", "pip", "download", "--only-binary=:all:", "--index-url",
                        PYPI, "--dest", str(tmp), *requirements], capture_output=True,
                       text=True, env=env, timeout=900, check=False)
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise AssertionError(f"pip download {' '.join(requirements)} from {PYPI} exited "
                             f"{r.returncode} (the lab's index needs PyPI once):\n{r.stdout[-2000:]}"
                             f"{r.stderr[-2000:]}")
    (tmp / ".complete").write_text(" ".join(requirements) + "\n")
    if done.exists():  # another session finished first
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.rename(done)
    return done


def _project(wheel: str) -> str:
    return re.sub(r"[-_.]+", "-", wheel.split("-", 1)[0]).lower()  # PEP 503 normalisation


def build_index(wheel_dir: Path, root: Path) -> Path:
    """root/simple/NAME/index.html (links with #sha256=) and root/files/*.whl (symlinks)."""
    files = root / "files"
    files.mkdir(parents=True)
    projects: dict[str, list[Path]] = {}
    for w in sorted(wheel_dir.glob("*.whl")):
        projects.setdefault(_project(w.name), []).append(w)
        (files / w.name).symlink_to(w.resolve())
    simple = root / "simple"
    simple.mkdir()
    for name, ws in projects.items():
        links = "".join(f'<a href="../../files/{html.escape(w.name)}#sha256='
                        f'{hashlib.sha256(w.read_bytes()).hexdigest()}">{html.escape(w.name)}</a>\n'
                        for w in ws)
        (simple / name).mkdir()
        (simple / name / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")
    index = "".join(f'<a href="{n}/">{n}</a>\n' for n in projects)
    (simple / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{index}</body></html>\n")
    return root


def _run(*cmd: str, input: str | None = None) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True, input=input, timeout=60)


@contextlib.contextmanager
def mirror(plan: P.LabPlan) -> Iterator[P.Node]:
    """The lab's mirror namespace on its private segment: the cloud flavour's own, or one
    added to this lab's switch now (the cloud plan's node: same name, addresses, interfaces)
    and deleted afterwards."""
    if any(n.name == "mirror" for n in plan.nodes):
        yield plan.node("mirror")
        return
    node = P.make_plan(plan.name, plan.gpus, plan.dir, venv=plan.venv, repo=plan.repo,
                       image="cloud").node("mirror")
    _run("ip", "netns", "add", node.netns)
    try:
        for i in node.ifaces:
            _run("ip", "-n", plan.switch_netns, "link", "add", i.switch_name, "type", "veth",
                 "peer", "name", i.name, "netns", node.netns)
            _run("ip", "-n", plan.switch_netns, "link", "set", i.switch_name, "master",
                 f"br-{i.segment}", "up")
        _run("ip", "netns", "exec", node.netns, "sysctl", "-q", "-w",
             *(f"{k.replace('/', '.')}={v}" for k, v in P.node_sysctls(node).items()))
        _run("ip", "-n", node.netns, "-batch", "-", input="\n".join(P.node_batch(node)) + "\n")
        yield node
    finally:
        subprocess.run(["ip", "netns", "del", node.netns], capture_output=True, timeout=60,
                       check=False)  # its end of each veth pair goes with it, and the peer too


@contextlib.contextmanager
def serve(netns: str, address: str, root: Path, port: int = 8081) -> Iterator[str]:
    """http.server on ADDRESS:PORT in `netns`, serving `root`; yields the index URL
    (…/simple) once a real GET of it answers 200."""
    with serve_directory(netns, address, root, port, "/simple/") as url:
        yield f"{url}/simple"
