"""`provision lab adopt`'s mapping (pure): what changes in the copy, what the lab cannot
stand for, and the copy's text (comments and order kept, nothing else changed)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from provision.inventory.source import load_yaml_text
from provision.lab import adopt as A
from provision.lab import plan as P
from provision.lab import pyindex as X
from provision.lab.adopt_write import rewrite

TEAM = Path(__file__).parent.parent / "fixtures" / "adopt" / "team.yml"
PLAN = P.make_plan("t", 2, "/var/lib/provision-lab/t", venv="/opt/venv", repo=None)


def _public(person: str) -> str:
    key = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(person.encode()).digest()).public_key()
    return key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode() + f" {person}@lab"


KEYS = {p: (f"/out/team/{p}", _public(p)) for p in ("alice", "bob", "carol")}


def view(tsig: str = "/out/tsig.key", plan: P.LabPlan = PLAN) -> A.LabView:
    return A.lab_view(plan, tsig_key=tsig, team_keys=KEYS)


def changes(a: A.Adoption) -> dict[tuple[Any, ...], Any]:
    return {c.path: c.value for c in a.changes}


def team() -> dict[str, Any]:
    return yaml.safe_load(TEAM.read_text())


def test_hosts_bastion_and_login_become_the_labs() -> None:
    a = A.adopt(team(), view())
    c = changes(a)
    assert a.hosts == {"trainer-a": "gpu1", "trainer-b": "gpu2"}
    assert a.bastion == "jump"
    assert c[("hosts", "trainer-a", "address")] == PLAN.address("gpu1")
    assert c[("hosts", "trainer-b", "address")] == PLAN.address("gpu2")
    assert c[("bastions", "jump", "address")] == PLAN.address("bastion")
    assert c[("defaults", "user")] == "admin"
    assert c[("defaults", "identity_file")] == PLAN.paths["identity"]
    assert c[("defaults", "known_hosts")] == PLAN.paths["known_hosts"]
    # else the bastion's firewall would shut the operator (on the pub segment) out
    assert c[("bastions", "jump", "allow_ssh_from")] == [PLAN.subnet4("pub"), PLAN.subnet6("pub")]
    assert c[("bastions", "jump", "egress")][0] == f"{PLAN.address('bastion', 'prv')}/32"
    assert a.unfit == ()


def test_zone_moves_to_the_labs_bind_with_its_tsig_key_and_host_addresses() -> None:
    a = A.adopt(team(), view())
    c = changes(a)
    z = ("dns", "zones", "team.example")
    assert a.zones == ("team.example",)
    assert (c[(*z, "provider")], c[(*z, "server")], c[(*z, "tsig_key_file")]) == \
        (P.DNS_PROVIDER, PLAN.address("ns1"), "/out/tsig.key")
    # the zones' nameserver (ns1.lab.test) is found through the lab's resolver
    assert c[("dns", "resolvers")] == [PLAN.address("resolver")]
    # a record holding a host's address follows the host
    assert c[(*z, "records", "api", "values")] == [PLAN.address("gpu1")]


def test_default_envs_run_from_the_bound_venv_people_get_lab_keys() -> None:
    c = changes(A.adopt(team(), view()))
    for svc in ("jupyter", "tensorboard"):
        assert c[("roles", "gpu-server", "services", svc, "venv")] == "/opt/venv"
    assert ("hosts", "trainer-a", "services", "model-api", "venv") not in c  # not a catalog env
    assert c[("team", "bob", "identity_file")] == "/out/team/bob"
    assert c[("team", "bob", "keys")][-1] == KEYS["bob"][1]
    assert len(c[("team", "bob", "keys")]) == 2  # theirs kept


def test_what_the_lab_cannot_stand_for_is_reported_and_left_as_written() -> None:
    doc = team()
    doc["bastions"]["inner"] = {"address": "10.0.0.9", "via": "jump"}
    doc["bastions"]["other"] = {"address": "10.9.0.1"}
    doc["hosts"]["deep"] = {"address": "10.0.2.1", "via": ["jump", "inner"]}
    doc["hosts"]["elsewhere"] = {"address": "10.9.1.1", "via": "other"}
    doc["hosts"]["trainer-a"]["aws"] = {"instance_id": "i-0123456789abcdef0"}
    doc["hosts"]["third"] = {"address": "10.0.1.23", "via": "jump"}  # the lab has 2 GPU hosts
    doc["python_envs"] = {"web": {"packages": ["six"]}}
    a = A.adopt(doc, view())
    unfit = {u.path: u.why for u in a.unfit}
    assert "reached through jump" in unfit[("bastions", "inner")]
    assert "the lab has one bastion" in unfit[("bastions", "other")]
    assert "chain of 2 bastions" in unfit[("hosts", "deep", "via")]
    assert "behind bastion other" in unfit[("hosts", "elsewhere", "via")]
    assert "EC2" in unfit[("hosts", "trainer-a", "aws")]
    assert "has 2 GPU hosts" in unfit[("hosts", "third")]
    # the lab's index serves the venv's distributions, and this view's venv has none
    assert "lacks six (not in the venv)" in unfit[("python_envs", "web", "packages")]
    touched = {c.path[:2] for c in a.changes}
    for name in ("deep", "elsewhere", "third"):
        assert ("hosts", name) not in touched
    assert ("bastions", "inner") not in touched and ("bastions", "other") not in touched
    assert a.hosts == {"trainer-a": "gpu1", "trainer-b": "gpu2"}
    # a lab big enough takes the third host
    big = P.make_plan("t", 3, "/var/lib/provision-lab/t", venv="/opt/venv", repo=None)
    assert A.adopt(doc, view(plan=big)).hosts["third"] == "gpu3"
    assert A.placement(doc)[1] == ["trainer-a", "trainer-b", "third"]


def test_a_zone_overlapping_the_labs_own_is_not_adopted() -> None:
    doc = team()
    doc["dns"]["zones"]["x.lab.test"] = {"provider": "rfc2136", "server": "10.0.0.1"}
    a = A.adopt(doc, view())
    assert a.zones == ("team.example",)
    assert ("dns", "zones", "x.lab.test") in {u.path for u in a.unfit}


def test_provider_fields_go_acme_moves_to_pebble() -> None:
    doc = team()
    doc["dns"]["zones"]["team.example"]["hosted_zone_id"] = "Z123"
    doc["acme"] = {"ca": "https://acme-v02.api.letsencrypt.org/directory", "email": "a@b.c"}
    c = changes(A.adopt(doc, view()))
    assert c[("dns", "zones", "team.example", "hosted_zone_id")] is A.DELETE
    assert c[("acme", "ca")] == P.pebble_directory(PLAN)
    assert ("acme", "email") not in c


def test_the_copy_keeps_comments_and_order_and_changes_nothing_else(tmp_path: Path) -> None:
    text = TEAM.read_text()
    (tmp_path / "tsig.key").write_text("key")
    a = A.adopt(load_yaml_text(text, str(TEAM)).data, view(tsig=str(tmp_path / "tsig.key")))
    new = rewrite(text, str(tmp_path / "inventory.yml"), a.changes)
    assert "# the cloud image's login" in new and "# the model API" in new
    assert "allow_ssh_from: [10." in new  # a flow list stays one
    keys = [line.split(":")[0] for line in new.splitlines() if line and line[0].isalpha()]
    assert keys == ["version", "defaults", "team", "bastions", "roles", "hosts", "dns"]
    before, after = yaml.safe_load(text), yaml.safe_load(new)
    A.apply_changes(before, a.changes)
    assert after == before


def test_a_copy_that_would_not_validate_is_refused(tmp_path: Path) -> None:
    from provision.lab.adopt_write import AdoptError

    text = TEAM.read_text()
    # a TSIG key outside the copy's tree: the loader's key rule refuses it, nothing written
    a = A.adopt(load_yaml_text(text, str(TEAM)).data, view(tsig="/etc/passwd"))
    with pytest.raises(AdoptError, match="does not validate"):
        rewrite(text, str(tmp_path / "inventory.yml"), a.changes)


def test_public_addresses_are_dropped_and_records_holding_them_follow_the_host(tmp_path: Path) -> None:
    """A lab host has no public address (and a real one is refused as `public_address` if
    private): kept, a public zone's from_hosts would put the real address in the lab's zone."""
    text = TEAM.read_text().replace(
        "    address: 10.0.1.21\n", "    address: 10.0.1.21\n    public_address: 203.0.113.21\n"
    ).replace("    address: 198.51.100.10\n",
              "    address: 198.51.100.10\n    public_address: 2001:db8::10\n").replace(
        "        api: {type: A, values: [10.0.1.21], ttl: 60}",
        "        api: {type: A, values: [203.0.113.21], ttl: 60}\n"
        "        jump: {type: AAAA, values: ['2001:db8::10'], ttl: 60}\n"
        "      from_hosts: true")
    doc = load_yaml_text(text, str(TEAM)).data
    assert doc["hosts"]["trainer-a"]["public_address"] == "203.0.113.21"  # the edit took
    (tmp_path / "tsig.key").write_text("key")
    a = A.adopt(doc, view(tsig=str(tmp_path / "tsig.key")))
    c = changes(a)
    assert c[("hosts", "trainer-a", "public_address")] is A.DELETE
    assert c[("bastions", "jump", "public_address")] is A.DELETE
    z = ("dns", "zones", "team.example", "records")
    assert c[(*z, "api", "values")] == [PLAN.address("gpu1")]
    assert c[(*z, "jump", "values")] == [PLAN.address("bastion", v6=True)]
    new = rewrite(text, str(tmp_path / "inventory.yml"), a.changes)
    assert "public_address:" not in new and "203.0.113.21" not in new and "2001:db8::10" not in new
    assert "from_hosts: true" in new


def _dist(name: str, version: str, *requires: str, python: str = "") -> X.Dist:
    return X.Dist(name, version, requires, f"{name.replace('-', '_')}-{version}.dist-info",
                  requires_python=python)


DISTS = (_dist("tensorboard", "2.21.0", "numpy>=1.12", "six>1.9", "futures; python_version < '3'"),
         _dist("numpy", "2.4.6", python=">=3.11"), _dist("six", "1.17.0"),
         _dist("soupsieve", "4.1.3", python=">=3.11.5"), _dist("bs4-lite", "1.0", "soupsieve"),
         X.Dist("provision", "0.1", (), "provision-0.1.dist-info", editable=True))


def test_declared_envs_come_from_the_labs_index_of_the_venv() -> None:
    doc = team()
    doc["python_envs"] = {
        "boards": {"packages": ["tensorboard>=2"], "index_url": "https://mirror.example/simple",
                   "extra_index_urls": ["https://download.pytorch.org/whl/cpu"]},
        "soup": {"packages": ["bs4-lite", "torch==2.1", "six<1", "provision"]}}
    doc["roles"]["gpu-server"]["services"]["tensorboard"]["venv"] = "boards"
    a = A.adopt(doc, A.lab_view(PLAN, tsig_key="/out/tsig.key", team_keys=KEYS, dists=DISTS,
                                python="3.11.2"))
    c = changes(a)
    url = f"http://{PLAN.address('resolver', 'prv')}:{X.PORT}/simple"
    assert c[("python_envs", "boards", "index_url")] == url
    assert c[("python_envs", "soup", "index_url")] == url
    assert c[("python_envs", "boards", "extra_index_urls")] is A.DELETE
    # what the index must serve: the closure, markers evaluated for the hosts' Python
    assert a.packages == ("tensorboard", "numpy", "six", "bs4-lite")  # what soup can have
    unfit = {u.path: u.why for u in a.unfit}
    why = unfit[("python_envs", "soup", "packages")]
    for words in ("torch==2.1 (not in the venv)", "six<1 (the venv has 1.17.0)",
                  "soupsieve 4.1.3 (it requires Python >=3.11.5, the lab's hosts run 3.11.2)",
                  "provision (installed editable"):
        assert words in why, why
    assert ("python_envs", "boards", "packages") not in unfit
    # a service that names a declared env keeps it (no bound venv)
    assert ("roles", "gpu-server", "services", "tensorboard", "venv") not in c
    assert c[("roles", "gpu-server", "services", "jupyter", "venv")] == "/opt/venv"


def test_the_copy_with_the_labs_index_validates(tmp_path: Path) -> None:
    text = TEAM.read_text() + "\npython_envs:\n  boards: {packages: [tensorboard], " \
        "index_url: 'https://mirror.example/simple'}  # the team's mirror\n"
    (tmp_path / "tsig.key").write_text("key")
    a = A.adopt(load_yaml_text(text, str(TEAM)).data,
                A.lab_view(PLAN, tsig_key=str(tmp_path / "tsig.key"), team_keys=KEYS,
                           dists=DISTS, python="3.11.2"))
    new = rewrite(text, str(tmp_path / "inventory.yml"), a.changes)
    assert "# the team's mirror" in new and "mirror.example" not in new
    assert yaml.safe_load(new)["python_envs"]["boards"]["index_url"] == \
        f"http://{PLAN.address('resolver', 'prv')}:{X.PORT}/simple"


HOST_TAGS = X.host_tags("3.11.2", ["manylinux_2_17_x86_64", "linux_x86_64"])


def _whl(name: str, version: str, *requires: str, python: str = "",
         tag: str = "py3-none-any") -> X.Dist:
    file = f"{name.replace('-', '_')}-{version}-{tag}.whl"
    return X.Dist(name, version, requires, f"{name.replace('-', '_')}-{version}.dist-info",
                  requires_python=python, wheel=f"/w/{file}", tags=(tag,))


def test_wheels_of_a_dir_are_preferred_to_the_venvs_and_fit_the_hosts() -> None:
    """The venv runs 3.11.7: its soupsieve needs >=3.11.5; the hosts' python3 is 3.11.2."""
    doc = team()
    doc["python_envs"] = {"soup": {"packages": ["bs4-lite", "tensorboard"]},
                          "native": {"packages": ["fast", "mac-only", "six<1"]}}
    wheels = (_whl("soupsieve", "2.5", python=">=3.8"), _whl("six", "1.17.0"),
              _whl("fast", "1.0", tag="cp311-cp311-manylinux_2_17_x86_64"),
              _whl("mac-only", "1.0", tag="cp311-cp311-macosx_11_0_arm64"),
              _whl("numpy", "2.4.6", python=">=3.12", tag="cp312-cp312-manylinux_2_17_x86_64"))
    a = A.adopt(doc, A.lab_view(PLAN, tsig_key="/out/tsig.key", team_keys=KEYS, dists=DISTS,
                                python="3.11.2", wheels=wheels, tags=HOST_TAGS))
    served = {(d.name, d.wheel) for d in a.served}
    # the DIR's soupsieve and six serve; numpy's wheel is for 3.12, so the venv's serves
    assert served == {("bs4-lite", ""), ("soupsieve", "/w/soupsieve-2.5-py3-none-any.whl"),
                      ("tensorboard", ""), ("numpy", ""), ("six", "/w/six-1.17.0-py3-none-any.whl"),
                      ("fast", "/w/fast-1.0-cp311-cp311-manylinux_2_17_x86_64.whl")}
    assert a.packages == ("bs4-lite", "tensorboard", "soupsieve", "numpy", "six", "fast")
    unfit = {u.path: u.why for u in a.unfit}
    assert ("python_envs", "soup", "packages") not in unfit  # soupsieve fits now
    why = unfit[("python_envs", "native", "packages")]
    assert ("mac_only-1.0-cp311-cp311-macosx_11_0_arm64.whl (its tags "
            "cp311-cp311-macosx_11_0_arm64 do not fit the lab's hosts' Python 3.11.2)" in why), why
    # neither the wheel nor the venv's six fits six<1: both named
    assert "six<1 (six-1.17.0-py3-none-any.whl from --wheels)" in why
    assert "six<1 (the venv has 1.17.0)" in why
    assert "the wheels of --wheels and the venv that ran `lab up`" in why


def test_a_wheel_for_another_python_is_named_with_why() -> None:
    doc = team()
    doc["python_envs"] = {"np": {"packages": ["numpy", "ghost"]}}
    wheels = (_whl("numpy", "2.4.6", python=">=3.12", tag="cp311-cp311-manylinux_2_17_x86_64"),)
    venv = (_dist("numpy", "2.4.6", python=">=3.12"),)
    a = A.adopt(doc, A.lab_view(PLAN, tsig_key="/out/tsig.key", team_keys=KEYS, dists=venv,
                                python="3.11.2", wheels=wheels, tags=HOST_TAGS))
    why = {u.path: u.why for u in a.unfit}[("python_envs", "np", "packages")]
    assert ("numpy-2.4.6-cp311-cp311-manylinux_2_17_x86_64.whl (it requires Python >=3.12, "
            "the lab's hosts run 3.11.2)") in why
    assert "numpy 2.4.6 (it requires Python >=3.12" in why
    assert "ghost (not in the venv nor in --wheels)" in why
    assert a.served == ()
