"""Pinned versions, holds and security updates against a real apt repository (issue 38).

One cloud-flavour lab for the module (`lab up --image cloud`: no sources, no lists; lab
hosts boot over the machine's root, so unattended-upgrades is installed). The repository is
built here and says it is Debian's security archive for the hosts' release (Origin Debian,
Label Debian-Security, Codename bookworm-security), which is what unattended-upgrades takes
upgrades from under our policy; it serves version 1.0 and 2.0 of a stand-in
`libnvidia-compute-999`, the kind of package whose upgrade under a loaded kernel module
breaks every CUDA program until a reboot. The tests run in order on gpu1.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.lab import plan as P

from . import apt_repo as R
from .conftest import Lab, _load, provision, require_lab_prerequisites

pytestmark = pytest.mark.lab

NV = "libnvidia-compute-999"
SUITE = "bookworm-security"
PIN = f"/etc/apt/preferences.d/provision-{NV}.pref"
CONF = "/etc/apt/apt.conf.d/99provision-updates"


@dataclass
class World:
    lab: Lab
    dir: Path
    doc: dict[str, Any]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_lab_prerequisites()
    missing = [p for p in ("gpg", "gpgconf", "dpkg-deb", "dpkg-scanpackages") if not shutil.which(p)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found (apt: gpg dpkg-dev, see Makefile LAB_DEBS)")
    d = tmp_path_factory.mktemp("updates")
    www = d / "www"
    try:
        key = R.make_key(d / "gnupg", "provision lab security archive <sec@lab.test>")
        R.build_repo(www / "repo", [R.build_package(d, NV, "1.0"), R.build_package(d, NV, "2.0")],
                     d / "gnupg", key, suite=SUITE, origin="Debian", label="Debian-Security")
    finally:
        R.stop_agent(d / "gnupg")
    name = f"pytest-updates-{secrets.token_hex(3)}"
    try:
        provision("up", "--image", "cloud", name=name)
        lab = _load(name)
        mirror = lab.plan.node("mirror")
        with R.serve(mirror.netns, mirror.primary.ipv4, www, suite=SUITE) as url:
            doc = yaml.safe_load(lab.inventory.read_text())
            doc.pop("dns", None)
            for h in doc["hosts"].values():
                h.pop("services", None)
            doc["defaults"]["apt_lock_timeout"] = 120
            doc["hosts"]["gpu1"]["packages"] = [{"name": NV, "version": "1.*", "hold": True}]
            doc["hosts"]["gpu1"]["apt_sources"] = {"sec": {
                "uri": f"{url}/repo", "suites": [SUITE], "components": [R.COMPONENT],
                "key": key.armored, "fingerprint": key.fingerprint}}
            yield World(lab, d, doc)
    finally:
        provision("down", name=name, check=False)
        shutil.rmtree(f"{P.DATA_ROOT}/{name}", ignore_errors=True)


def run(w: World, verb: str, doc: dict[str, Any]) -> tuple[int, dict[str, Any], str]:
    inv = w.dir / f"inventory-{secrets.token_hex(2)}.yml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    args = ("apply", "gpu1", "--yes") if verb == "apply" else ("plan", "gpu1")
    code, data, err = w.lab.provision_json(*args, "-i", str(inv))
    assert data, f"no JSON (exit {code}): {err}"
    return code, {h["host"]: h for h in data["hosts"]}["gpu1"], err


def with_gpu1(doc: dict[str, Any], **fields: Any) -> dict[str, Any]:
    d = json.loads(json.dumps(doc))
    d["hosts"]["gpu1"].update(fields)
    return d


def version(w: World) -> str:
    return w.lab.host("gpu1", "dpkg-query", "-W", "-f=${Status} ${Version}", NV).stdout


def held(w: World) -> list[str]:
    return w.lab.host("gpu1", "apt-mark", "showhold").stdout.split()


def simulated_upgrade(w: World) -> str:
    return w.lab.host("gpu1", "apt-get", "-s", "upgrade").stdout


def dry_run(w: World) -> str:
    r = w.lab.host("gpu1", "unattended-upgrade", "--dry-run", "--debug", check=False, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr


def will_upgrade(dry: str) -> list[str]:
    """The packages unattended-upgrade's dry run says it would upgrade."""
    m = re.search(r"^Packages that will be upgraded: (.*)$", dry, re.M)
    return m.group(1).split() if m else []


def test_a_pinned_version_is_installed_as_pinned_and_held(world: World) -> None:
    code, host, err = run(world, "apply", world.doc)
    assert code == 0, err + json.dumps(host)
    assert version(world) == "hold ok installed 1.0"  # 2.0 is in the repository
    assert held(world) == [NV]
    assert "Pin: version 1.*\nPin-Priority: 1001\n" in world.lab.host("gpu1", "cat", PIN).stdout
    policy = world.lab.host("gpu1", "apt-cache", "policy", NV).stdout
    assert "Candidate: 1.0" in policy and re.search(r"^ \*\*\* 1\.0 1001$", policy, re.M), policy
    assert world.lab.host("gpu1", "cat", "/var/lib/provision/apt-holds").stdout.endswith(f"\n{NV}\n")
    assert world.lab.host("gpu1", "stat", "-c", "%a %U", "/var/lib/provision/apt-holds").stdout == "600 root\n"
    # our updates file is what apt applies, Debian's own files notwithstanding
    dump = world.lab.host("gpu1", "apt-config", "dump").stdout
    assert 'Unattended-Upgrade::Automatic-Reboot "false";' in dump
    assert 'Unattended-Upgrade::Package-Blacklist:: ".*nvidia.*$";' in dump
    assert 'origin=Debian,codename=${distro_codename},label=Debian";' not in dump


def test_a_noop_rerun_changes_nothing(world: World) -> None:
    code, host, err = run(world, "apply", world.doc)
    assert (code, host["status"], host["actions"], host["remote_execs"]) == (0, "ok", [], 1), err


def test_unhold_by_hand_is_drift_and_the_next_apply_holds_again(world: World) -> None:
    world.lab.host("gpu1", "apt-mark", "unhold", NV)
    code, host, err = run(world, "plan", world.doc)
    assert code == 0, err
    assert [(a["step"], a["description"]) for a in host["actions"]] == [
        ("packages", f"apt-mark hold {NV}")]
    code, host, err = run(world, "apply", world.doc)
    assert code == 0 and host["status"] == "changed", err
    assert held(world) == [NV]


def test_another_version_installed_by_hand_goes_back_to_the_pin(world: World) -> None:
    world.lab.host("gpu1", "apt-get", "install", "-y", "-q", "--allow-change-held-packages",
                   f"{NV}=2.0", timeout=120)
    # apt-get install leaves it selected `install`: the hold is gone with the old version
    assert version(world) == "install ok installed 2.0"
    code, host, err = run(world, "plan", world.doc)
    assert [a["description"] for a in host["actions"]] == [
        f"apt-get install {NV} (pinned 1.*)", f"apt-mark hold {NV}"], err
    code, host, err = run(world, "apply", world.doc)
    assert code == 0, err
    assert version(world) == "hold ok installed 1.0"


def test_a_hold_keeps_apt_and_unattended_upgrades_off_it(world: World) -> None:
    # the hold alone: no version pin and nothing blacklisted
    doc = with_gpu1(world.doc, packages=[{"name": NV, "hold": True}], updates={"never": []})
    code, _, err = run(world, "apply", doc)
    assert code == 0, err
    assert world.lab.host("gpu1", "test", "-e", PIN, check=False).returncode == 1  # stale pin gone
    assert version(world) == "hold ok installed 1.0" and held(world) == [NV]
    sim = simulated_upgrade(world)
    assert f"Inst {NV}" not in sim and re.search(rf"kept back:\n\s+{NV}\n", sim), sim
    dry = dry_run(world)
    assert NV not in will_upgrade(dry), dry
    assert "No packages found that can be upgraded unattended" in dry, dry


def test_the_default_blacklist_keeps_unattended_upgrades_off_it_without_a_hold(world: World) -> None:
    # no hold: apt itself would upgrade it, unattended-upgrades must not
    doc = with_gpu1(world.doc, packages=[NV])
    code, _, err = run(world, "apply", doc)
    assert code == 0, err
    assert held(world) == []  # the hold we set is lifted
    assert world.lab.host("gpu1", "test", "-e", "/var/lib/provision/apt-holds",
                          check=False).returncode == 1
    assert f"Inst {NV} [1.0] (2.0" in simulated_upgrade(world)
    dry = dry_run(world)
    assert NV not in will_upgrade(dry), dry
    # the control: with nothing blacklisted the same dry run would take it
    code, _, err = run(world, "apply", with_gpu1(doc, updates={"never": []}))
    assert code == 0, err
    assert will_upgrade(dry_run(world)) == [NV]
