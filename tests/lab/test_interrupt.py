"""Ctrl-C during `provision apply`, in the lab: SIGINT sent to a real run in the operator
namespace at each phase, each phase reached for sure (a hold of tests/support/faults.py:
`--hold-dir` before a wave or a confirmation, `--pause-until` inside a host's batch), never
after a fixed sleep.

Each test adds a team member (a fresh key), which changes every host, the bastion too;
what the hosts have afterwards is read back on the hosts.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import secrets
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.sigint import Proc

from .conftest import FAULTY, Lab

pytestmark = pytest.mark.lab

GPUS = ("gpu1", "gpu2")
NODES = ("bastion", *GPUS)
WAIT = 240.0  # the most any awaited mark may take on a busy machine


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The lab's bastion and GPU hosts (without roles, clusters, DNS), converged once."""
    d = tmp_path_factory.mktemp("interrupt")
    doc = yaml.safe_load(lab.inventory.read_text())
    for key in ("roles", "clusters", "dns", "acme"):
        doc.pop(key, None)
    doc["hosts"] = {h: {"address": doc["hosts"][h]["address"], "via": "bastion"} for h in GPUS}
    inv = d / "inventory.yml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    code, data, err = lab.provision_json("apply", "--yes", "-i", str(inv), timeout=600)
    assert code == 0, err + json.dumps(data)[:3000]
    yield {"dir": d, "doc": doc}


def with_member(world: dict[str, Any]) -> tuple[Path, str]:
    """A copy of the inventory with one more member: (its path, the member's name)."""
    d: Path = world["dir"]
    name = f"m{secrets.token_hex(3)}"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name,
                    "-f", str(d / name)], check=True)
    doc = json.loads(json.dumps(world["doc"]))
    doc["team"][name] = {"keys": [(d / f"{name}.pub").read_text().strip()]}
    path = d / f"inventory-{name}.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path, name


class Run(Proc):
    """`provision apply --yes` through faults.py in the operator namespace; stderr read
    line by line as it comes, so the test can wait for what the run says."""

    def __init__(self, lab: Lab, inv: Path, faults: list[str], *args: str,
                 as_json: bool = True) -> None:
        super().__init__([], cmd=["ip", "netns", "exec", lab.plan.operator.netns, *FAULTY,
                                  *faults, "--", "apply", "--yes", "-i", str(inv),
                                  *(["--json"] if as_json else []), *args])
        self.wait = WAIT

    def finish_json(self, timeout: float = WAIT) -> tuple[int, dict[str, Any], str, str]:
        code, err, out = self.finish(timeout)
        try:
            data = json.loads(out)
        except json.JSONDecodeError:
            data = {}
        return code, data, err, out


def until(what: str, check: Any, run: Run, timeout: float = WAIT) -> Any:
    """Poll `check()` until it returns something true (the run still going)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        if run.p.poll() is not None:
            raise AssertionError(f"the run ended ({run.p.returncode}) before {what}:\n"
                                 + "".join(run.lines))
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout} s")


def temps(lab: Lab, host: str, member: str) -> list[str]:
    """The batch's temp files in the member's .ssh (the batch is held before its rename)."""
    r = lab.host(host, "ls", "-A", f"/home/{member}/.ssh", check=False)
    return [n for n in r.stdout.split() if n.startswith(".provision-tmp.")]


def has_member(lab: Lab, host: str, member: str) -> bool:
    return lab.host(host, "id", "-u", member, check=False).returncode == 0


def by_host(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["host"]: h for h in data["hosts"]}


def gate_path() -> str:
    return f"/run/provision-test-gate-{secrets.token_hex(4)}"


# --- the tests ------------------------------------------------------------------------

def test_before_any_host_starts_nothing_changes(lab: Lab, world: dict[str, Any],
                                                 tmp_path: Path) -> None:
    inv, member = with_member(world)
    run = Run(lab, inv, ["--hold-dir", str(tmp_path)])
    try:
        until("the first wave", (tmp_path / "wave-0.reached").exists, run)
        run.interrupt()
        run.said("stopping: 0 hosts finishing, 3 not started", timeout=30)
        (tmp_path / "wave-0.go").touch()
        code, data, err, _ = run.finish_json()
    finally:
        run.kill()
    assert code == 130, err
    assert data["interrupted"] is True
    for h in NODES:
        r = by_host(data)[h]
        assert r["status"] == "not-started" and r["changed"] == 0, r
        assert "not applied" in r["note"], r
        assert not has_member(lab, h, member), h
    assert "interrupted (Ctrl-C): 3 not started; run apply again to finish" in err


def test_during_the_bastion_wave_the_bastion_finishes_and_no_host_starts(
        lab: Lab, world: dict[str, Any]) -> None:
    inv, member = with_member(world)
    gate = gate_path()
    run = Run(lab, inv, ["--pause-until", gate])
    try:
        until("the bastion's batch", lambda: temps(lab, "bastion", member), run)
        run.interrupt()
        line = run.said("stopping: 1 host finishing", timeout=30)
        assert "(bastion: running the batch, step " in line and ", 2 not started" in line, line
        lab.host("bastion", "touch", gate)
        code, data, err, _ = run.finish_json()
    finally:
        run.kill()
        lab.host("bastion", "rm", "-f", gate, check=False)
    assert code == 130, err
    hosts = by_host(data)
    assert hosts["bastion"]["status"] == "changed", hosts["bastion"]
    assert has_member(lab, "bastion", member) and not temps(lab, "bastion", member)
    for h in GPUS:
        assert hosts[h]["status"] == "not-started", hosts[h]
        assert not has_member(lab, h, member), h


def test_during_a_host_batch_it_finishes_and_the_recap_says_the_rest(
        lab: Lab, world: dict[str, Any]) -> None:
    """One host at a time (--forks 1): the one in its batch finishes, the other never
    starts; the recap on the terminal's stdout says so (no --json here)."""
    inv, member = with_member(world)
    gate = gate_path()
    lab.host("bastion", "touch", gate)
    run = Run(lab, inv, ["--pause-until", gate], "--forks", "1", as_json=False)
    try:
        busy = until("a GPU host's batch",
                     lambda: next((h for h in GPUS if temps(lab, h, member)), None), run)
        run.interrupt()
        line = run.said("stopping: 1 host finishing", timeout=30)
        assert f"({busy}: running the batch, step " in line and ", 1 not started" in line, line
        lab.host(busy, "touch", gate)
        code, _, err, out = run.finish_json()
    finally:
        run.kill()
        for h in NODES:
            lab.host(h, "rm", "-f", gate, check=False)
    other = next(h for h in GPUS if h != busy)
    assert code == 130, err
    assert "Aborted!" not in err
    assert has_member(lab, busy, member) and not has_member(lab, other, member)
    row = next(ln for ln in out.splitlines() if f" {other} " in f" {ln} ")
    assert "not started" in row, out
    last = run.said("interrupted (Ctrl-C): ")
    assert "2 changed" in last and "1 not started" in last, last


def test_during_the_confirmation_window_the_change_is_confirmed(
        lab: Lab, world: dict[str, Any], tmp_path: Path) -> None:
    inv, _ = with_member(world)
    mark = f"# interrupt test {secrets.token_hex(4)}"
    for name in ("wave-0", "wave-1", "confirm-bastion"):
        (tmp_path / f"{name}.go").touch()
    run = Run(lab, inv, ["--hold-dir", str(tmp_path), "--sshd-extra", mark])
    try:
        for h in GPUS:
            until(f"{h}'s confirmation", (tmp_path / f"confirm-{h}.reached").exists, run)
        run.interrupt()
        line = run.said("stopping: 2 hosts finishing", timeout=30)
        assert "gpu1: confirming over a new login (rollback in " in line, line
        for h in GPUS:
            (tmp_path / f"confirm-{h}.go").touch()
        code, data, err, _ = run.finish_json()
    finally:
        run.kill()
    assert code == 130, err
    for h in NODES:
        assert by_host(data)[h]["status"] == "changed", by_host(data)[h]
        # confirmed: the change stays, no rollback left armed
        assert mark in lab.host(h, "sh", "-c", "cat /etc/ssh/sshd_config.d/*.conf").stdout
        armed = lab.host(h, "sh", "-c", "ls /var/lib/provision/commit/*/armed 2>/dev/null",
                         check=False).stdout
        assert armed.strip() == "", (h, armed)


def test_a_second_ctrl_c_leaves_at_once_and_says_what_covers_it(
        lab: Lab, world: dict[str, Any]) -> None:
    inv, member = with_member(world)
    gate = gate_path()
    lab.host("bastion", "touch", gate)
    run = Run(lab, inv, ["--pause-until", gate])
    try:
        until("gpu1's batch", lambda: temps(lab, "gpu1", member), run)
        run.interrupt()
        run.said("stopping: ", timeout=30)
        run.interrupt()
        # the batch on the hosts is still held: only leaving at once ends the run now
        code, data, err, out = run.finish_json(timeout=30)
    finally:
        run.kill()
    assert code == 130, err
    assert out == "" and data == {}  # no recap: it left at once
    assert "leaving now; what may be half-way:" in err
    half = next(ln for ln in err.splitlines() if ln.startswith("  gpu1 (running the batch"))
    assert "renamed, so every file is whole, old or new" in half, half
    for h in GPUS:
        lab.host(h, "touch", gate)
    # the next run takes the host lock over and finishes what was left
    code, data, err = lab.provision_json("apply", "--yes", "-i", str(inv), timeout=300)
    assert code == 0, err
    for h in NODES:
        lab.host(h, "rm", "-f", gate, check=False)
        assert has_member(lab, h, member) and not temps(lab, h, member), h


def test_a_terminal_sees_each_host_change_state(lab: Lab, world: dict[str, Any]) -> None:
    """stderr on a terminal (a pty): the live lines say what a host is doing as it does it,
    here its batch's step while the batch is held on the host."""
    inv, member = with_member(world)
    gate = gate_path()
    lab.host("bastion", "touch", gate)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    p = subprocess.Popen(["ip", "netns", "exec", lab.plan.operator.netns, *FAULTY,
                          "--pause-until", gate, "--", "apply", "--yes", "-i", str(inv)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    screen = bytearray()
    grew = threading.Condition()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the run closed the terminal
                chunk = b""
            with grew:
                screen.extend(chunk)
                grew.notify_all()
            if not chunk:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    want = b"gpu1  running the batch, step "
    try:
        with grew:
            assert grew.wait_for(lambda: want in screen or p.poll() is not None, WAIT)
            assert want in screen, bytes(screen).decode(errors="replace")
            seen = bytes(screen)
        for h in GPUS:
            lab.host(h, "touch", gate)
        assert p.wait(timeout=WAIT) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for h in NODES:
            lab.host(h, "rm", "-f", gate, check=False)
        reader.join(10)
        os.close(master)
    # the same lines went from gathering facts to applying, redrawn in place
    assert seen.index(b"gathering facts: ") < seen.index(b"applying: ") < seen.index(want)
    assert has_member(lab, "gpu1", member)
