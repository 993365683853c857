"""Issue 39's first hour, replayed in the lab: the imagined team's inventory
(tests/fixtures/first_hour/team.yml: three people, two GPU servers behind a bastion,
per-person Jupyter, TensorBoard, a public model API behind the door, a DNS name and one
record to move) checked with several typos at once, adopted into the lab, planned,
applied on a terminal, planned again, and planned with a host unreachable.

The apply runs a small playbook (users, python_envs, services): the bootstrap's full
install is other modules' subject; what is tested here is what a newcomer sees. The model
API's env (`six`, declared for PyPI) installs from the lab's own package index.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import pty
import secrets
import shutil
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provision.lab import plan as P

from .conftest import (
    PROVISION,
    Lab,
    _keys_usable_from_copies,
    _load,
    provision,
    require_lab_prerequisites,
)
from .test_lab_adopt import lab_cli

pytestmark = pytest.mark.lab

TEAM = Path(__file__).parent.parent / "fixtures" / "first_hour" / "team.yml"
PLAYBOOK = "name: first-hour\nhosts: [bastions, all]\nsteps: [users, python_envs, services]\n"
WAIT = 600.0
TYPOS = (  # (as written, the typo, what check must say of it)
    ("carol: null}", "carlo: null}", "'carlo' is not a team member; did you mean 'carol'?"),
    ("{logdir: /srv/runs}", "{logdir: runs}", "tensorboard.logdir: invalid path 'runs'"),
    ("    address: 10.0.1.22\n", "    adress: 10.0.1.22\n",
     "hosts.trainer-b.adress: unknown key 'adress'; did you mean 'address'?"),
    ("values: [198.51.100.80]", "values: [ip]", "records.www.values[0]: invalid IP address 'ip'"),
    ("~/.ssh/id_ed25519", "~/.ssh/id_ed2551", "defaults.identity_file: ~/.ssh/id_ed2551 does not exist"),
)


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    """A lab of this file's own: the team's inventory replaces the lab's users and services
    and stops a host's sshd, which no other file should find (tests/conftest.py LAB_OWN)."""
    require_lab_prerequisites()
    name = f"pytest-first-{secrets.token_hex(3)}"
    try:
        provision("up", name=name)
        loaded = _load(name)
        with _keys_usable_from_copies(loaded):
            yield loaded
    finally:
        provision("down", name=name, check=False)
        shutil.rmtree(f"{P.DATA_ROOT}/{name}", ignore_errors=True)


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("first-hour")
    (d / "playbook.yml").write_text(PLAYBOOK)
    r = lab_cli(lab, "adopt", str(TEAM), "--out", str(d / "team"), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    yield {"dir": d, "adopted": json.loads(r.stdout)}


def cli(lab: Lab, *args: str, timeout: float = WAIT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, *args],
                          capture_output=True, text=True, timeout=timeout)


def plan(lab: Lab, world: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return cli(lab, "plan", "-i", world["adopted"]["inventory"],
                     "--playbook", str(world["dir"] / "playbook.yml"))


def test_check_reports_every_typo_at_once(tmp_path: Path) -> None:
    text = TEAM.read_text()
    for right, wrong, _ in TYPOS:
        assert text.count(right) == 1, right
        text = text.replace(right, wrong)
    bad = tmp_path / "team.yml"
    bad.write_text(text)
    r = subprocess.run([*PROVISION, "check", "-i", str(bad)], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    assert r.returncode == 2, r.stdout + r.stderr
    for _, _, said in TYPOS:  # one pass: every problem, none held back for the next round
        assert said in r.stderr, (said, r.stderr)
    assert "Traceback" not in r.stderr


def test_adopt_moves_the_team_and_its_env_into_the_lab(lab: Lab, world: dict[str, Any]) -> None:
    a = world["adopted"]
    assert a["hosts"] == {"trainer-a": "gpu1", "trainer-b": "gpu2"} and a["bastion"] == "jump"
    assert a["not_in_lab"] == [], a["not_in_lab"]
    assert a["index"] == f"http://{lab.addr('resolver', 'prv')}:8080/simple"
    assert a["packages"] == ["six"]
    fields = {c["field"] for c in a["changes"]}
    assert {"hosts.trainer-a.public_address", "bastions.jump.public_address",
            "python_envs.api.index_url"} <= fields, fields
    text = Path(a["inventory"]).read_text()
    assert "public_address:" not in text and "203.0.113.21" not in text


def test_plan_apply_on_a_terminal_then_no_changes(lab: Lab, world: dict[str, Any]) -> None:
    r = plan(lab, world)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Plan: " in r.stdout and " to add" in r.stdout, r.stdout[-2000:]

    seen, chunks, code, out = on_a_terminal(lab, "apply", "--yes", "-i",
                                            world["adopted"]["inventory"], "--playbook",
                                            str(world["dir"] / "playbook.yml"))
    screen = seen.decode(errors="replace")
    assert code == 0, screen[-3000:] + out[-3000:]
    assert "Applied: 3 hosts converged, 3 changed." in out, out[-2000:]
    # the board is drawn for each phase, each host's state in words, as it happens
    for words in ("gathering facts: ", "applying: ", "running the batch, step "):
        assert words in screen, (words, screen[-3000:])
    # a host's login is drawn too (connecting or probing: whichever a redraw caught)
    assert "  connecting" in screen or "  probing (taking the host lock" in screen, screen[:3000]
    assert screen.index("gathering facts: ") < screen.index("applying: ")
    # rich's Live redraws the board on its own clock (8/s) while hosts work: the terminal
    # is never left silent however long a step takes (the figure is for the report)
    gaps = [b - a for a, b in itertools.pairwise(chunks)]
    print(f"apply on a terminal: {len(chunks)} writes in {chunks[-1] - chunks[0]:.1f} s, "
          f"longest silence {max(gaps):.2f} s")
    assert len(chunks) > 10
    # the model API's env came from the lab's index (the lab has no Internet)
    lab.host("gpu1", "/opt/provision/envs/api/bin/python", "-c", "import six")
    assert lab.host("gpu1", "systemctl", "is-active", "provision-model-api.service",
                    check=False).stdout.strip() == "active"

    r = plan(lab, world)
    assert r.returncode == 0 and "No changes." in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


def test_a_plan_with_a_host_unreachable_says_so(lab: Lab, world: dict[str, Any]) -> None:
    lab.host("gpu2", "systemctl", "stop", "ssh.socket", "ssh.service", check=False)
    try:
        r = plan(lab, world)
    finally:
        lab.host("gpu2", "systemctl", "start", "ssh.service")
    said = r.stdout + r.stderr
    assert "1 of 3 hosts could not be planned (1 unreachable). No changes on the other 2." \
        in said, said[-3000:]
    assert "\nNo changes." not in r.stdout
    assert r.returncode == 1, said[-2000:]


def on_a_terminal(lab: Lab, *args: str) -> tuple[bytes, list[float], int, str]:
    """`provision ARGS` in the operator namespace, stderr on a pty (200 columns): what the
    terminal got, when each write came (monotonic), the exit status and stdout."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    p = subprocess.Popen(["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, *args],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    screen = bytearray()
    chunks: list[float] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the run closed the terminal
                return
            if not chunk:
                return
            chunks.append(time.monotonic())
            screen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        out, _ = p.communicate(timeout=WAIT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        reader.join(10)
        os.close(master)
    return bytes(screen), chunks, p.returncode, out
