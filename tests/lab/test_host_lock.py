"""The host lock against a real host (gpu1, through the bastion): one converge at a time.

Uses the harden playbook (sshd and firewall, both commit-confirmed), because what the lock
must cover is the commit-confirmed window: two applies started together, an operator
SIGKILLed while the host's rollback is armed, a lock held by someone else (timeout), and a
record left by a holder that died (taken over, said so). Restores gpu1 to the lab's
unhardened state at the start and at the end (test_harden's `_unharden`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.hosts import lock as L
from provision.steps.commit import rollback_unit
from tests.support.watch import Watch

from .conftest import FAULTY, PROVISION, Lab, model_api, one_host_inventory
from .test_harden import COMMIT_DIR, _unharden, write

pytestmark = pytest.mark.lab

HOST = "gpu1"
HELD_UNIT = "test-lock-holder"


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    d = tmp_path_factory.mktemp("lock")
    doc = one_host_inventory(lab, HOST, {"model-api": model_api(lab)})

    def variant(name: str, extra: str | None) -> Path:
        v = json.loads(json.dumps(doc))
        if extra:
            v["hosts"][HOST]["services"]["model-api"]["expose"]["from"].append(extra)
        return write(d / f"{name}.yml", v)

    _unharden(lab)
    lab.host(HOST, "sh", "-c", f"systemctl stop {HELD_UNIT}; rm -f {L.HOLDER}", check=False)
    yield {"good": variant("good", None), "wider": variant("wider", "192.0.2.0/24"),
           "other": variant("other", "198.51.100.0/24")}
    lab.host(HOST, "sh", "-c", f"systemctl stop {HELD_UNIT}; rm -f {L.HOLDER}", check=False)
    _unharden(lab)


def cli(lab: Lab, inventory: Path, *extra: str, faults: tuple[str, ...] = ()) -> list[str]:
    head = [*FAULTY, *faults, "--"] if faults else PROVISION
    return ["ip", "netns", "exec", lab.plan.operator.netns, *head, "apply", "--yes",
            "--playbook", "harden", "-i", str(inventory), "--json", *extra, HOST]


def finish(p: subprocess.Popen[str]) -> tuple[int, dict[str, Any], str]:
    out, err = p.communicate(timeout=300)
    try:
        data = json.loads(out)
    except json.JSONDecodeError:
        data = {}
    return p.returncode, data, err


def finish_once(p: subprocess.Popen[str], said: str,
                then: Callable[[], None]) -> tuple[int, dict[str, Any], str]:
    """`finish`, calling `then` once the run's stderr says `said`: the test moves the host
    on when the run has seen the state it must see, however long it took to get there.
    Fails if the run ends without saying it."""
    w = Watch(p, said)
    try:
        while not w.said.wait(0.2) and p.poll() is None:
            pass
        w.readers[0].join(timeout=30 if p.poll() is not None else 0)
        assert w.said.is_set(), f"the run ended without saying {said!r}:\n{''.join(w.lines)}"
        then()
        p.wait(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        w.join()
    return w.result()


def host_result(data: dict[str, Any]) -> dict[str, Any]:
    (h,) = data["hosts"]
    return h  # type: ignore[no-any-return]


def steps(h: dict[str, Any]) -> list[str]:
    return sorted(a["step"] for a in h["actions"])


def v4(lab: Lab) -> str:
    return lab.host(HOST, "iptables", "-w", "-S", "PROVISION-INPUT", check=False).stdout


def test_two_applies_at_once_the_second_plans_after_the_first(
        lab: Lab, world: dict[str, Path], tmp_path: Path) -> None:
    """Both on the unhardened host. The first converges everything (sshd, firewall) and is
    held inside its confirmation window (the lock held) until the second says it waits for
    it: the test, not the machine's speed, decides that they overlap. The second then plans
    from the first's result: its only change is the firewall (one more API source), and
    the host ends as the second's inventory says."""
    held = tmp_path / "hold"
    held.mkdir()
    (held / "wave-0.go").touch()  # only the confirmation is held
    a = subprocess.Popen(cli(lab, world["good"], "--confirm-timeout", "600",
                             faults=("--hold-dir", str(held))),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(3000):  # until A holds the lock, its changes armed, before confirming
        if (held / f"confirm-{HOST}.reached").exists() or a.poll() is not None:
            break
        time.sleep(0.1)
    assert (held / f"confirm-{HOST}.reached").exists(), finish(a)
    b = subprocess.Popen(cli(lab, world["wider"]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    rb = finish_once(b, f"{HOST}: waiting for apply by ",
                     lambda: (held / f"confirm-{HOST}.go").touch())
    ra = finish(a)
    assert ra[0] == 0 and rb[0] == 0, (ra, rb)
    ha, hb = host_result(ra[1]), host_result(rb[1])
    # who went second: the host's clock when each took the lock
    (first, _), (second, second_run) = sorted(
        [((ha, "good"), ra), ((hb, "wider"), rb)], key=lambda x: x[0][0]["lock"]["acquired_at"])
    assert (first[1], second[1]) == ("good", "wider")
    assert second[0]["lock"]["contended"], (ha["lock"], hb["lock"], ra[2], rb[2])
    assert second[0]["lock"]["waited_for"]["command"] == "apply", second[0]["lock"]
    assert f"{HOST}: waiting for apply by " in second_run[2]
    assert steps(first[0]) == ["firewall", "sshd"]
    assert (first[0]["status"], second[0]["status"]) == ("changed", "changed")
    # planned after the first had finished: the sshd drop-in was already right
    assert steps(second[0]) == ["firewall"], second[0]["actions"]
    assert ("192.0.2.0/24" in v4(lab)) == (second[1] == "wider")
    for name in ("good", "wider"):  # what each would do now: only the second's is a no-op
        code, data, _ = lab.provision_json("plan", "--playbook", "harden", "-i", str(world[name]),
                                           HOST)
        assert code == 0 and host_result(data)["changes"] == (0 if name == second[1] else 1), name


def test_killed_in_the_confirmation_window_the_next_waits_for_the_rollback(
        lab: Lab, world: dict[str, Path]) -> None:
    """A is SIGKILLed while its firewall change waits for confirmation (armed on the host).
    B, started right after, takes the stale lock over, waits for the host's own rollback of
    A's change, and only then plans and applies: its change survives (before the lock, A's
    rollback fired after B had applied and restored A's backup over B's rules)."""
    code, data, err = lab.provision_json("apply", "--yes", "--playbook", "harden", "-i",
                                         str(world["good"]), HOST)
    assert code == 0, err
    # A's rollback stays armed for as long as the test needs (600 s): the test, not the
    # machine's speed, decides when it runs (after B said it waits for it), by moving the
    # window's deadline to now and starting the unit its timer would start
    a = subprocess.Popen(cli(lab, world["wider"], "--confirm-timeout", "600",
                             faults=("--sleep-before-confirm", "600")),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    commit = ""
    try:
        for _ in range(300):  # until A's rules are in and its rollback is armed
            armed = lab.host(HOST, "sh", "-c", f"ls {COMMIT_DIR}/*/armed", check=False).stdout
            if "192.0.2.0/24" in v4(lab) and armed.strip():
                commit = armed.strip().split("/")[-2]
                break
            if a.poll() is not None:
                break
            time.sleep(0.1)
    finally:
        os.kill(a.pid, signal.SIGKILL)
        a.wait()
    assert commit, "A never got its rules in"
    d = f"{COMMIT_DIR}/{commit}"

    def rollback_now() -> None:  # what the timer does once the window is over
        lab.host(HOST, "sh", "-c", f"date +%s > {d}/deadline")
        lab.host(HOST, "systemctl", "start", f"{rollback_unit(commit)}.service")

    b = subprocess.Popen(cli(lab, world["other"]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    code, data, err = finish_once(b, f"{HOST}: waiting for the host's own rollback of firewall",
                                  rollback_now)
    assert code == 0, err + json.dumps(data, indent=1)
    h = host_result(data)
    assert h["status"] == "changed" and steps(h) == ["firewall"], h
    assert commit in h["lock"]["rollbacks_waited"], h["lock"]
    assert f"{HOST}: waiting for the host's own rollback of firewall" in err
    assert f"{HOST}: took over a stale lock from apply by " in err
    assert lab.host(HOST, "cat", f"{d}/result").stdout.strip() == "rolled-back"
    live = v4(lab)
    assert "198.51.100.0/24" in live and "192.0.2.0/24" not in live, live
    code, data, _ = lab.provision_json("plan", "--playbook", "harden", "-i", str(world["other"]),
                                       HOST)
    assert code == 0 and host_result(data)["changes"] == 0


def hold(lab: Lab, since: int, token: str, host: str = HOST) -> None:
    """Someone else's apply holds the host's lock: a process with the flock, and its record,
    written once the flock is taken, as a real holder does. Written before, it could land
    between a just-ended run's release reading the record (its own) and removing it, and
    be the one removed ("a run that left no record")."""
    rec = "\t".join(["provision-lock", "1", "alice@laptop", "apply", str(since), token, "1",
                     "held", "-"])
    lab.host(host, "mkdir", "-p", L.LOCK_DIR)
    lab.host(host, "systemd-run", f"--unit={HELD_UNIT}", "flock", L.LOCK, "sh", "-c",
             f"printf '%s\\n' '{rec}' > {L.HOLDER} && exec sleep 600")
    for _ in range(100):  # until the flock is really taken and the record written under it
        if (lab.host(host, "flock", "-n", L.LOCK, "true", check=False).returncode != 0
                and lab.host(host, "cat", L.HOLDER, check=False).stdout.strip() == rec):
            return
        time.sleep(0.1)
    raise AssertionError("the stand-in holder never took the lock")


def test_a_held_lock_times_out_naming_the_holder_and_plan_does_not_wait(
        lab: Lab, world: dict[str, Path]) -> None:
    since = int(lab.host(HOST, "date", "+%s").stdout)
    hold(lab, since, "00000000000100000000")
    try:
        code, data, err = lab.provision_json("apply", "--yes", "--playbook", "harden", "-i",
                                             str(world["good"]), "--lock-timeout", "3", HOST)
        h = host_result(data)
        who = f"apply by alice@laptop since {L.clock(since, time.time())}"
        assert code == 1 and h["status"] == "failed", err
        assert h["error"] == f"host lock held by {who}; gave up after 3 s (--lock-timeout)"
        assert f"{HOST}: waiting for {who}" in err
        assert h["remote_execs"] == 1
        code, data, err = lab.provision_json("plan", "--playbook", "harden", "-i",
                                             str(world["good"]), HOST)
        h = host_result(data)
        assert code == 0 and h["lock"]["held_by"]["by"] == "alice@laptop"
        assert h["note"].startswith(f"{who} holds the host: this plan may be out of date")
    finally:
        lab.host(HOST, "systemctl", "stop", HELD_UNIT, check=False)


def test_a_dead_holders_lock_is_taken_over_with_a_message(lab: Lab, world: dict[str, Path]) -> None:
    """The record of the previous test's holder is still there, its process gone (stopped:
    the kernel released its flock). The next apply takes the lock and says whose it was."""
    rec = lab.host(HOST, "cat", L.HOLDER).stdout
    assert "alice@laptop" in rec
    assert lab.host(HOST, "flock", "-n", L.LOCK, "true", check=False).returncode == 0
    code, data, err = lab.provision_json("plan", "--playbook", "harden", "-i",
                                         str(world["good"]), HOST)
    assert code == 0 and "apply by alice@laptop since " in host_result(data)["note"]
    assert "was never released: its process on the host died" in host_result(data)["note"]
    code, data, err = lab.provision_json("apply", "--yes", "--playbook", "harden", "-i",
                                         str(world["good"]), HOST)
    h = host_result(data)
    assert code == 0, err
    assert f"{HOST}: took over a stale lock from apply by alice@laptop since " in err
    assert ("its process on the host died without releasing it (killed, or the host restarted)"
            in h["note"])
    assert h["lock"]["took_over"]["by"] == "alice@laptop"
    # released cleanly at the end: the next run takes it over from nobody, in one exec
    code, data, err = lab.provision_json("apply", "--yes", "--playbook", "harden", "-i",
                                         str(world["good"]), HOST)
    h = host_result(data)
    assert code == 0 and h["lock"]["took_over"] is None and "took over" not in err, (h, err)
    assert (h["status"], h["remote_execs"]) == ("ok", 1)
    # the release is one byte, not waited for (no round trip at the end of a no-op): the
    # host removes the record when that byte arrives, which may be after the run returned
    deadline = time.monotonic() + 10
    while lab.host(HOST, "test", "-e", L.HOLDER, check=False).returncode == 0:
        assert time.monotonic() < deadline, lab.host(HOST, "cat", L.HOLDER, check=False).stdout
        time.sleep(0.05)


SERVICE = "lockprobe"  # a stand-in service, the only thing the services-only playbook manages


@pytest.fixture
def services(lab: Lab, tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A services-only playbook for gpu1 and gpu2, and two inventories that differ in the
    stand-in's port; the units are removed afterwards."""
    (tmp_path / "services.yml").write_text(
        "name: lock-services\ndescription: services only\nhosts: [all]\nsteps: [services]\n")
    doc = yaml.safe_load(lab.inventory.read_text())
    doc.pop("roles", None)
    doc.pop("dns", None)
    out = {"playbook": tmp_path / "services.yml"}
    for name, port in (("a", 8890), ("b", 8891), ("c", 8892)):
        v = json.loads(json.dumps(doc))
        v["hosts"] = {h: {"address": doc["hosts"][h]["address"], "via": "bastion",
                          "services": {SERVICE: {"port": port, "command":
                                                 "/usr/bin/python3 -m http.server --bind {bind} {port}"}}}
                      for h in ("gpu1", "gpu2")}
        out[name] = write(tmp_path / f"{name}.yml", v)
    yield out
    for h in ("gpu1", "gpu2"):
        lab.host(h, "sh", "-c", f"systemctl disable --now provision-{SERVICE}.service; "
                 f"rm -f /etc/systemd/system/provision-{SERVICE}.service; systemctl daemon-reload; "
                 f"systemctl stop {HELD_UNIT}; rm -f {L.HOLDER}", check=False)


def test_a_run_waiting_for_an_older_one_lets_its_other_hosts_go(
        lab: Lab, services: dict[str, Path]) -> None:
    """Wait-die: A (gpu1, gpu2) takes gpu1, finds gpu2 held by an older run, and lets gpu1 go
    while it waits; B (gpu1 alone) gets through at once instead of waiting for A, which waits
    for the older run. When the older run ends A probes gpu1 again (B's result) and
    converges both. Without it, B waits on A, which waits on the older run (and two such
    runs holding one host each would wait for each other until their timeouts)."""

    head = ["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, "apply", "--yes",
            "--playbook", str(services["playbook"]), "--json"]
    # both hosts as b: A (a) has changes on both, B (c) on gpu1
    assert subprocess.run([*head, "-i", str(services["b"]), "gpu1", "gpu2"], capture_output=True,
                          timeout=120).returncode == 0
    hold(lab, int(lab.host("gpu2", "date", "+%s").stdout), "00000000000100000000", "gpu2")
    a = subprocess.Popen([*head, "-i", str(services["a"]), "--lock-timeout", "120", "gpu1", "gpu2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err: list[str] = []
    let_go = threading.Event()

    def read() -> None:
        assert a.stderr is not None
        for line in a.stderr:
            err.append(line)
            if line.startswith("gpu1: let go of this host's lock"):
                let_go.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert let_go.wait(timeout=120), "".join(err)
        code, data, b_err = lab.provision_json("apply", "--yes", "--playbook",
                                               str(services["playbook"]), "-i", str(services["c"]),
                                               "--lock-timeout", "20", "gpu1")
        assert code == 0, b_err
        assert host_result(data)["status"] == "changed"
        b_took = host_result(data)["lock"]["acquired_at"]
        assert a.poll() is None, "A should still be waiting for the older run on gpu2"
    finally:
        lab.host("gpu2", "systemctl", "stop", HELD_UNIT, check=False)
    out, _ = a.communicate(timeout=120)
    reader.join(timeout=30)
    assert a.returncode == 0, "".join(err)
    hosts = {h["host"]: h for h in json.loads(out)["hosts"]}
    assert "gpu2: waiting for apply by alice@laptop since " in "".join(err)
    assert hosts["gpu2"]["status"] == "changed"
    assert hosts["gpu2"]["lock"]["took_over"]["by"] == "alice@laptop"
    # gpu1 was probed again after B had taken (and so released) it: A planned from B's result
    assert hosts["gpu1"]["status"] == "changed"
    assert hosts["gpu1"]["lock"]["acquired_at"] > b_took, (hosts["gpu1"]["lock"], b_took)
    for h in ("gpu1", "gpu2"):
        unit = lab.host(h, "cat", f"/etc/systemd/system/provision-{SERVICE}.service").stdout
        assert "8890" in unit and "8891" not in unit and "8892" not in unit, (h, unit)


def test_bootstrap_and_harden_at_once_one_after_the_other(lab: Lab, world: dict[str, Path]) -> None:
    """Two processes, two playbooks, two inventories, one host: the default bootstrap (users,
    packages, services, sshd, firewall) with `good`, harden with `wider`. Whichever takes the
    lock second plans from what the first left: no sshd change of its own (the first
    installed it), and the host ends with the second's firewall."""
    _unharden(lab)
    boot = cli(lab, world["good"])
    boot[boot.index("--playbook") + 1] = "bootstrap-gpu-server"
    runs = {"good": subprocess.Popen(boot, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True),
            "wider": subprocess.Popen(cli(lab, world["wider"]), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)}
    try:
        done = {k: finish(p) for k, p in runs.items()}
        assert all(r[0] == 0 for r in done.values()), done
        hs = {k: host_result(r[1]) for k, r in done.items()}
        first, second = sorted(hs, key=lambda k: hs[k]["lock"]["acquired_at"])
        assert hs[second]["lock"]["contended"], hs
        assert "sshd" in steps(hs[first]) and "sshd" not in steps(hs[second]), hs
        assert hs[second]["status"] == "changed" and "firewall" in steps(hs[second]), hs
        assert ("192.0.2.0/24" in v4(lab)) == (second == "wider")
        book = {"good": "bootstrap-gpu-server", "wider": "harden"}
        code, data, err = lab.provision_json("plan", "--detailed-exitcode", "--playbook",
                                             book[second], "-i", str(world[second]), HOST)
        assert code == 0, err + json.dumps(data)
    finally:
        for p in runs.values():
            if p.poll() is None:
                p.kill()
        lab.host(HOST, "sh", "-c", "systemctl disable --now provision-model-api.service; "
                 "rm -f /etc/systemd/system/provision-model-api.service; systemctl daemon-reload",
                 check=False)


def test_two_runs_over_two_hosts_at_once_neither_loses_a_change(
        lab: Lab, services: dict[str, Path]) -> None:
    """A (gpu1, gpu2) and B (gpu2, gpu1) at the same moment, each wanting both hosts: no
    deadlock until a timeout (wait-die), both succeed, and on each host the run that took the
    lock last is what the host says (its unit), with nothing left for it to do."""
    head = ["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, "apply", "--yes",
            "--playbook", str(services["playbook"]), "--json", "--lock-timeout", "60"]
    procs = {"a": subprocess.Popen([*head, "-i", str(services["a"]), "gpu1", "gpu2"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
             "b": subprocess.Popen([*head, "-i", str(services["b"]), "gpu2", "gpu1"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)}
    done = {k: finish(p) for k, p in procs.items()}
    assert all(r[0] == 0 for r in done.values()), done
    port = {"a": "8890", "b": "8891"}
    for h in ("gpu1", "gpu2"):
        took = {k: next(x for x in r[1]["hosts"] if x["host"] == h)["lock"]["acquired_at"]
                for k, r in done.items()}
        last = max(took, key=lambda k: took[k])
        unit = lab.host(h, "cat", f"/etc/systemd/system/provision-{SERVICE}.service").stdout
        assert port[last] in unit, (h, took, unit)
        code, data, err = lab.provision_json("plan", "--detailed-exitcode", "--playbook",
                                             str(services["playbook"]), "-i",
                                             str(services[last]), h)
        assert code == 0, err + json.dumps(data)
