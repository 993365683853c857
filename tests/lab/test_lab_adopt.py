"""Your own inventory in the lab: `provision lab adopt` on the issue's imagined team
(tests/fixtures/adopt/team.yml: three people, two GPU servers behind a bastion, per-person
Jupyter, TensorBoard, a public model API, a DNS name), then `apply` of the copy converges,
`dns apply` puts the name in the lab's BIND, and a second apply changes nothing. Also
`lab shell HOST -- CMD` (root in the container, by the lab's or the adopted name)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import pytest
import yaml

from .conftest import PROVISION, Lab

pytestmark = pytest.mark.lab

TEAM = Path(__file__).parent.parent / "fixtures" / "adopt" / "team.yml"


def lab_cli(lab: Lab, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PROVISION, "lab", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PROVISION_LAB_NAME": lab.name})


@pytest.fixture(scope="module")
def adopted(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("adopt") / "team"
    r = lab_cli(lab, "adopt", str(TEAM), "--out", str(out), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    return dict(json.loads(r.stdout))


def apply(lab: Lab, inventory: str) -> tuple[int, dict[str, Any], str]:
    return lab.provision_json("apply", "-i", inventory, "--yes", timeout=600)


def test_adopt_maps_the_team_onto_the_running_lab(lab: Lab, adopted: dict[str, Any]) -> None:
    assert adopted["lab_up"] is False  # the running lab: two GPU hosts fit two servers
    assert adopted["hosts"] == {"trainer-a": "gpu1", "trainer-b": "gpu2"}
    assert adopted["bastion"] == "jump" and adopted["zones"] == ["team.example"]
    assert adopted["not_in_lab"] == []
    copy = Path(adopted["inventory"])
    text = copy.read_text()
    assert "# the cloud image's login" in text  # comments survive
    doc = yaml.safe_load(text)
    assert doc["hosts"]["trainer-a"]["address"] == lab.addr("gpu1")
    assert doc["dns"]["zones"]["team.example"]["tsig_key_file"] == str(copy.parent / "tsig.key")
    assert (copy.parent / "tsig.key").stat().st_mode & 0o077 == 0
    # the lab's BIND is authoritative for the adopted zone, and the resolver asks it
    with lab.operator_netns():
        for server in (lab.addr("ns1"), lab.addr("resolver")):
            r = dns.query.udp(dns.message.make_query("team.example", "SOA"), server, timeout=3)
            assert r.answer, f"{server} has no SOA for team.example"


def test_the_copy_converges_and_a_second_apply_changes_nothing(lab: Lab, adopted: dict[str, Any]) -> None:
    inv = adopted["inventory"]
    code, data, err = apply(lab, inv)
    assert code == 0, (err[-3000:], json.dumps(data)[:3000])
    first = {h["host"]: h for h in data["hosts"]}
    assert set(first) == {"jump", "trainer-a", "trainer-b"}, first
    assert all(h["changed"] > 0 for h in first.values()), first  # a fresh lab: real work
    # per-person Jupyter, TensorBoard and the public API are running on the lab's hosts
    for host in ("gpu1", "gpu2"):
        units = lab.host(host, "systemctl", "list-units", "--state=active", "--no-legend",
                         "provision-*").stdout
        for member in ("alice", "bob", "carol"):
            assert f"@{member}.service" in units, (host, units)
        assert "provision-tensorboard.service" in units, (host, units)
    assert "provision-model-api.service" in lab.host("gpu1", "systemctl", "list-units",
                                                     "--state=active", "provision-*").stdout
    code, data, err = apply(lab, inv)
    assert code == 0, err[-3000:]
    again = {h["host"]: (h["status"], h["changed"], h["changes"]) for h in data["hosts"]}
    assert again == {h: ("ok", 0, 0) for h in first}, json.dumps(data)[:3000]
    # the DNS name, through the lab's BIND, read back from the resolver the hosts use
    code, data, err = lab.provision_json("dns", "apply", "-i", inv, "--yes")
    assert code == 0, (err[-2000:], data)
    with lab.operator_netns():
        r = dns.query.udp(dns.message.make_query("api.team.example", "A"), lab.addr("resolver"),
                          timeout=3)
    assert [rr.address for rrset in r.answer for rr in rrset] == [lab.addr("gpu1")]


def test_lab_shell_runs_as_root_in_the_container(lab: Lab, adopted: dict[str, Any]) -> None:
    r = lab_cli(lab, "shell", "gpu1", "--", "id", "-u")
    assert (r.returncode, r.stdout) == (0, "0\n"), r.stderr
    r = lab_cli(lab, "shell", "trainer-b", "--", "cat", "/etc/hostname")  # the adopted name
    assert (r.returncode, r.stdout) == (0, "gpu2\n"), r.stderr
    r = lab_cli(lab, "shell", "gpu1", "--", "sh", "-c", "exit 7")
    assert r.returncode == 7
    r = lab_cli(lab, "shell", "nosuch", "--", "true")
    assert r.returncode == 2 and "no lab host nosuch" in r.stderr
    rows = json.loads(lab_cli(lab, "status", "--json").stdout)["hosts"]
    gpu1 = next(x for x in rows if x["host"] == "gpu1")
    assert gpu1["leader"] == lab.leader("gpu1") and gpu1["leader"] != gpu1["pid"]


def test_wheels_of_a_dir_are_served_as_they_are(lab: Lab, tmp_path: Path) -> None:
    """`--wheels DIR`: a wheel made for the hosts' Python is served byte for byte, with its
    sha256, from the resolver to a GPU host's namespace; the rest comes from the venv."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    whl = wheels / "labdemo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("labdemo/__init__.py", "X = 1\n")
        z.writestr("labdemo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: labdemo\n"
                   "Version: 1.0\nRequires-Python: >=3.8\nRequires-Dist: six>=1\n")
        z.writestr("labdemo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n"
                   "Tag: py3-none-any\n")
        z.writestr("labdemo-1.0.dist-info/RECORD", "")
    inv = tmp_path / "team.yml"
    inv.write_text(TEAM.read_text() + "\npython_envs:\n  demo: {packages: [labdemo]}\n")
    r = lab_cli(lab, "adopt", str(inv), "--out", str(tmp_path / "out"), "--wheels", str(wheels))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"(1 wheel(s) from {wheels}, 1 distribution(s) of " in r.stdout, r.stdout
    r = lab_cli(lab, "adopt", str(inv), "--out", str(tmp_path / "out"), "--wheels", str(wheels),
                "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    a = json.loads(r.stdout)
    assert a["not_in_lab"] == [] and a["packages"] == ["labdemo", "six"]
    assert (a["from_wheels"], a["from_venv"]) == (["labdemo-1.0-py3-none-any.whl"], ["six"])
    # read back from where pip runs: the page's link and digest, and the file's bytes
    fetch = ("import hashlib, re, sys, urllib.request as u\n"
             "o = u.build_opener(u.ProxyHandler({}))\n"
             "page = o.open(sys.argv[1] + '/labdemo/').read().decode()\n"
             "href, digest = re.search(r'href=\"([^\"#]+)#sha256=([0-9a-f]+)\"', page).groups()\n"
             "data = o.open(u.urljoin(sys.argv[1] + '/labdemo/', href)).read()\n"
             "print(href, digest, hashlib.sha256(data).hexdigest())\n")
    out = lab.host("gpu1", "python3", "-c", fetch, a["index"]).stdout.split()
    want = hashlib.sha256(whl.read_bytes()).hexdigest()
    assert out == ["../../files/labdemo-1.0-py3-none-any.whl", want, want], out
