"""A bare cloud image bootstraps in one run: the lab's cloud flavour (`lab up --image cloud`),
a real apt repository of the tests' own, the dpkg lock held at the start.

One cloud-flavour lab for the whole module (its own boot, ~5-15 s). The repository is built
here (dpkg-deb, dpkg-scanpackages, a Release signed with a gpg key made here) and served by
http.server in the lab's mirror namespace on the private segment, the only place the GPU
hosts can reach. The tests run in order and share the hosts: bootstrap, no-op, then the
faults (a held lock, a wrong fingerprint, a 404), each leaving the host converged.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.lab import plan as P

from . import apt_repo as R
from .conftest import PROVISION, Lab, _load, provision, require_lab_prerequisites

pytestmark = pytest.mark.lab

GPUS = ("gpu1", "gpu2")
EXTRA = "provision-lab-extra"
PROVIDER, VIRTUAL = "provision-lab-provider", "provision-lab-virtual"  # Provides: VIRTUAL
RELEASE = "/run/provision-test-release-lock"

# Holds apt's locks the way apt does (fcntl), says so, and lets go once RELEASE exists (or
# after two minutes, so a failed test never leaves a host locked).
HOLDER = f"""
import fcntl, os, sys, time
fs = [open(p, 'a') for p in ('/var/lib/dpkg/lock-frontend', '/var/lib/dpkg/lock')]
for f in fs:
    fcntl.lockf(f, fcntl.LOCK_EX)
print('held', flush=True)
end = time.monotonic() + 120
while not os.path.exists({RELEASE!r}) and time.monotonic() < end:
    time.sleep(0.05)
"""


@dataclass
class World:
    lab: Lab
    dir: Path
    www: Path
    url: str
    key: R.Key
    other: R.Key  # a second key: what a wrong (or swapped) key file looks like
    doc: dict[str, Any]


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_lab_prerequisites()
    missing = [p for p in ("gpg", "gpgconf", "dpkg-deb", "dpkg-scanpackages") if not shutil.which(p)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found (apt: gpg dpkg-dev, see Makefile LAB_DEBS)")
    d = tmp_path_factory.mktemp("cloud")
    www = d / "www"
    try:
        key = R.make_key(d / "gnupg", "provision lab repository <repo@lab.test>")
        other = R.make_key(d / "gnupg-other", "someone else <other@lab.test>")
        R.build_repo(www / "repo", [R.build_package(d, R.PACKAGE), R.build_package(d, EXTRA),
                                    R.build_package(d, PROVIDER, provides=VIRTUAL)],
                     d / "gnupg", key)
    finally:  # gpg started an agent per home: none outlives the set-up
        for home in ("gnupg", "gnupg-other"):
            R.stop_agent(d / home)
    name = f"pytest-cloud-{secrets.token_hex(3)}"
    try:
        provision("up", "--image", "cloud", name=name)
        lab = _load(name)
        mirror = lab.plan.node("mirror")
        with R.serve(mirror.netns, mirror.primary.ipv4, www) as url:
            doc = yaml.safe_load(lab.inventory.read_text())
            # its own lab, whose TSIG key no config directory names: DNS is not this test's
            doc.pop("dns", None)
            for h in doc["hosts"].values():  # gpu1's model API: its door needs the zone
                h.pop("services", None)
            doc["defaults"]["apt_lock_timeout"] = 120
            doc["roles"]["gpu-server"]["packages"] = [R.PACKAGE]
            doc["roles"]["gpu-server"]["apt_sources"] = {"lab": source(f"{url}/repo", key)}
            yield World(lab, d, www, url, key, other, doc)
    finally:
        provision("down", name=name, check=False)
        shutil.rmtree(f"{P.DATA_ROOT}/{name}", ignore_errors=True)


def source(uri: str, key: R.Key, fingerprint: str | None = None) -> dict[str, Any]:
    return {"uri": uri, "suites": [R.SUITE], "components": [R.COMPONENT], "key": key.armored,
            "fingerprint": fingerprint or key.fingerprint}


def apply(w: World, doc: dict[str, Any], *hosts: str) -> tuple[int, dict[str, dict[str, Any]], str]:
    inv = w.dir / f"inventory-{secrets.token_hex(2)}.yml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    code, data, err = w.lab.provision_json("apply", *hosts, "--yes", "-i", str(inv))
    assert data, f"no JSON (exit {code}): {err}"
    return code, {h["host"]: h for h in data["hosts"]}, err


def installed(w: World, host: str, package: str) -> bool:
    r = w.lab.host(host, "dpkg-query", "-W", "-f=${Status}", package, check=False)
    return r.stdout.strip() == "install ok installed"


def exists(w: World, host: str, path: str) -> bool:
    return w.lab.host(host, "test", "-e", path, check=False).returncode == 0


def stat(w: World, host: str, *paths: str) -> str:
    return w.lab.host(host, "stat", "-c", "%n %Y %s %i", *paths).stdout


class Holders:
    """A process on each host holding apt's locks until told to let go."""

    def __init__(self, w: World, hosts: tuple[str, ...]):
        self.w = w
        self.procs: dict[str, subprocess.Popen[str]] = {}
        for h in hosts:
            w.lab.host(h, "rm", "-f", RELEASE)
            p = subprocess.Popen(["nsenter", "-t", str(w.lab.leader(h)), "-a", "--",
                                  "python3", "-c", HOLDER], stdout=subprocess.PIPE, text=True)
            self.procs[h] = p
        for h, p in self.procs.items():  # ready: the lock is really held
            assert p.stdout is not None and p.stdout.readline().strip() == "held", h

    def release(self, host: str) -> None:
        self.w.lab.host(host, "touch", RELEASE)
        self.procs[host].wait(timeout=30)

    def close(self) -> None:
        for h, p in self.procs.items():
            if p.poll() is None:
                self.release(h)


def waiting_for_lock(w: World, host: str) -> bool:
    """provision's wait loop (`sleep 0.2` between looks at /proc/locks) runs on the host."""
    return w.lab.host(host, "pgrep", "-f", "^sleep 0.2$", check=False).returncode == 0


def test_the_cloud_flavour_looks_like_a_fresh_cloud_image(cloud: World) -> None:
    lab = cloud.lab
    for h in ("bastion", *GPUS):
        assert lab.host(h, "sh", "-c", "ls /var/lib/apt/lists/*Packages* 2>/dev/null",
                        check=False).stdout == "", f"{h} has package lists"
        assert lab.host(h, "sh", "-c", "ls /etc/apt/sources.list.d/; cat /etc/apt/sources.list "
                        "2>/dev/null", check=False).stdout.strip() == "", f"{h} has apt sources"
        drop_in = lab.host(h, "cat", "/etc/ssh/sshd_config.d/50-cloud-init.conf").stdout
        assert drop_in == "PasswordAuthentication yes\n"
        assert not exists(cloud, h, "/etc/ssh/sshd_config.d/00-provision-lab.conf")
        effective = lab.host(h, "sshd", "-T").stdout.splitlines()
        assert "passwordauthentication yes" in effective, f"{h}: cloud-init's drop-in does not win"
        unit = lab.host(h, "systemctl", "is-enabled", P.DPKG_LOCK_UNIT, check=False).stdout
        assert unit.strip() == "enabled"
    socket = lab.host("gpu2", "systemctl", "is-enabled", "ssh.socket", check=False).stdout.strip()
    service = lab.host("gpu2", "systemctl", "is-enabled", "ssh.service", check=False).stdout.strip()
    assert (socket, service) == ("enabled", "disabled")
    active = lab.host("gpu2", "systemctl", "is-active", "ssh.socket", check=False).stdout.strip()
    assert active == "active"
    assert lab.host("gpu1", "systemctl", "is-enabled", "ssh.socket",
                    check=False).stdout.strip() == "masked"


def test_bootstrap_installs_from_the_lab_repository_while_the_dpkg_lock_is_held(cloud: World) -> None:
    holders = Holders(cloud, GPUS)
    try:
        inv = cloud.dir / "bootstrap.yml"
        inv.write_text(yaml.safe_dump(cloud.doc, sort_keys=False))
        with open(cloud.dir / "bootstrap.out", "w+") as fout, \
                open(cloud.dir / "bootstrap.err", "w+") as ferr:
            proc = subprocess.Popen(["ip", "netns", "exec", cloud.lab.plan.operator.netns,
                                     *PROVISION, "apply", "--yes", "-i", str(inv), "--json"],
                                    stdout=fout, stderr=ferr, text=True)
            pending = list(GPUS)
            while pending and proc.poll() is None:  # each host gets to its wait, then is let go
                for h in [h for h in pending if waiting_for_lock(cloud, h)]:
                    holders.release(h)
                    pending.remove(h)
                time.sleep(0.1)
            proc.wait(timeout=300)
            fout.seek(0)
            ferr.seek(0)
            out, err = fout.read(), ferr.read()
    finally:
        holders.close()
    assert not pending, f"{pending} never waited for the lock; apply exited {proc.returncode}: {err}"
    data = {h["host"]: h for h in json.loads(out)["hosts"]}
    assert proc.returncode == 0, err + out
    for h in GPUS:
        assert data[h]["status"] == "changed", data[h]
        assert "s for the dpkg lock (held by python3 (pid " in (data[h]["note"] or ""), data[h]
        assert installed(cloud, h, R.PACKAGE)
        lists = cloud.lab.host(h, "sh", "-c", "ls /var/lib/apt/lists/").stdout
        assert f"{cloud.lab.plan.address('mirror')}:8080_repo_dists_lab_InRelease" in lists
        assert exists(cloud, h, "/etc/apt/keyrings/provision-lab.asc")


def test_a_noop_rerun_runs_no_apt_get_update(cloud: World) -> None:
    before = {h: stat(cloud, h, "/var/lib/provision/apt-updated", "/var/lib/provision/apt.log")
              for h in GPUS}
    code, hosts, err = apply(cloud, cloud.doc, *GPUS)
    assert code == 0, err
    for h in GPUS:
        assert (hosts[h]["status"], hosts[h]["actions"], hosts[h]["remote_execs"]) == ("ok", [], 1)
        # apt-get was not run at all: our stamp and apt's log of our last call are untouched
        assert stat(cloud, h, "/var/lib/provision/apt-updated", "/var/lib/provision/apt.log") == before[h]


def with_gpu1(doc: dict[str, Any], **fields: Any) -> dict[str, Any]:
    d = json.loads(json.dumps(doc))
    d["hosts"]["gpu1"].update(fields)
    return d


def test_a_held_dpkg_lock_is_a_one_line_failure_and_changes_nothing(cloud: World) -> None:
    doc = with_gpu1(cloud.doc, packages=[EXTRA])
    doc["defaults"]["apt_lock_timeout"] = 2
    holders = Holders(cloud, ("gpu1",))
    try:
        code, hosts, err = apply(cloud, doc, "gpu1")
    finally:
        holders.close()
    assert code == 1, err
    error = hosts["gpu1"]["error"]
    assert hosts["gpu1"]["status"] == "failed" and "\n" not in error
    assert error.startswith("the dpkg lock is still held by python3 (pid ") and "after 2 s" in error
    assert not installed(cloud, "gpu1", EXTRA)


def test_a_key_whose_fingerprint_does_not_match_is_refused_on_the_host(cloud: World) -> None:
    # another path: one repository under two names is refused at load, before any host
    swapped = source(f"{cloud.url}/swapped", cloud.other, fingerprint=cloud.key.fingerprint)
    doc = with_gpu1(cloud.doc, packages=[EXTRA], apt_sources={"swapped": swapped})
    code, hosts, err = apply(cloud, doc, "gpu1")
    assert code == 1, err
    error = hosts["gpu1"]["error"]
    assert "\n" not in error
    assert error == (f"apt source swapped: the signing key has fingerprint {cloud.other.fingerprint}, "
                     f"the inventory pins {cloud.key.fingerprint}; refused, nothing installed")
    for path in ("/etc/apt/keyrings/provision-swapped.asc",
                 "/etc/apt/sources.list.d/provision-swapped.sources"):
        assert not exists(cloud, "gpu1", path), path
    assert not installed(cloud, "gpu1", EXTRA)


def test_a_source_answering_404_fails_in_one_line_then_the_next_run_converges(cloud: World) -> None:
    doc = with_gpu1(cloud.doc, packages=[EXTRA],
                    apt_sources={"late": source(f"{cloud.url}/late", cloud.key)})
    lists = cloud.lab.host("gpu1", "ls", "/var/lib/apt/lists/").stdout
    code, hosts, err = apply(cloud, doc, "gpu1")
    assert code == 1, err
    error = hosts["gpu1"]["error"]
    assert "\n" not in error
    assert error.startswith("apt-get update failed: E: The repository '"), error
    assert error.endswith("does not have a Release file."), error
    assert f"{cloud.url}/late" in error
    for path in ("/etc/apt/keyrings/provision-late.asc",
                 "/etc/apt/sources.list.d/provision-late.sources"):
        assert not exists(cloud, "gpu1", path), f"{path} left behind"
    assert cloud.lab.host("gpu1", "ls", "/var/lib/apt/lists/").stdout == lists
    assert not installed(cloud, "gpu1", EXTRA)
    # the server comes back (the repository published at that path): the same inventory converges
    shutil.copytree(cloud.www / "repo", cloud.www / "late")
    code, hosts, err = apply(cloud, doc, "gpu1")
    assert code == 0, err
    assert hosts["gpu1"]["status"] == "changed"
    assert installed(cloud, "gpu1", EXTRA)
    assert exists(cloud, "gpu1", "/etc/apt/sources.list.d/provision-late.sources")
    code, hosts, err = apply(cloud, doc, "gpu1")
    assert (code, hosts["gpu1"]["status"], hosts["gpu1"]["remote_execs"]) == (0, "ok", 1), err


def test_a_changed_source_whose_update_fails_is_put_back_as_it_was(cloud: World) -> None:
    files = ("/etc/apt/sources.list.d/provision-lab.sources", "/etc/apt/keyrings/provision-lab.asc")
    before = {f: cloud.lab.host("gpu2", "cat", f).stdout for f in files}
    moved = json.loads(json.dumps(cloud.doc))
    moved["hosts"]["gpu2"]["apt_sources"] = {"lab": source(f"{cloud.url}/gone", cloud.key)}
    code, hosts, err = apply(cloud, moved, "gpu2")
    assert code == 1, err
    assert f"{cloud.url}/gone" in hosts["gpu2"]["error"] and "\n" not in hosts["gpu2"]["error"]
    assert {f: cloud.lab.host("gpu2", "cat", f).stdout for f in files} == before
    assert not cloud.lab.host("gpu2", "sh", "-c", "ls -a /etc/apt/sources.list.d/ "
                              "/etc/apt/keyrings/ | grep provision-tmp", check=False).stdout
    # the host is as it was: the inventory it was converged with has nothing to do
    code, hosts, err = apply(cloud, cloud.doc, "gpu2")
    assert (code, hosts["gpu2"]["status"], hosts["gpu2"]["remote_execs"]) == (0, "ok", 1), err


def test_an_install_that_does_not_take_effect_fails_naming_why(cloud: World) -> None:
    code, hosts, err = apply(cloud, with_gpu1(cloud.doc, packages=[VIRTUAL]), "gpu1")
    assert code == 1, err
    assert hosts["gpu1"]["error"] == (
        f"apt-get install {VIRTUAL} succeeded but dpkg does not report {VIRTUAL} installed "
        "(status: unknown ok not-installed); is it a virtual package? name the package that provides it")
    assert installed(cloud, "gpu1", PROVIDER)  # what apt chose instead
