"""apt: `apt_sources` in the inventory, the packages step's decisions (when to refresh the
lists, which sources to write or remove), the deb822 template, and the lab's cloud flavour as
data. The apt fact: tests/facts/apt; the host side (sh, gpg, the dpkg lock):
tests/integration/test_apt_host.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.errors import RenderError
from provision.facts import parse
from provision.inventory import InventoryError, load_inventory
from provision.inventory.model import Inventory
from provision.lab import plan as P
from provision.render.apt import source_file
from provision.render.sinks import deb822_word
from provision.steps import apt_script
from provision.steps.actions import AptSources, AptUpdate, InstallPackages, RemoveFile
from provision.steps.packages import MAX_LIST_AGE, PackagesStep
from provision.steps.step import Refused
from tests.support.probe_records import answer, file_rec

FPR = "EB693B3035CD5710E231E123A4B469963BF863CC"
KEY = ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEZ0000BYJKwYBBAHaRw8BAQdA\n"
       "-----END PGP PUBLIC KEY BLOCK-----\n")
NOW = 1_800_000_000
SRC = "/etc/apt/sources.list.d/provision-docker.sources"
KEYFILE = "/etc/apt/keyrings/provision-docker.asc"


def inventory(tmp_path: Path, host: dict[str, Any] | None = None,
              role: dict[str, Any] | None = None) -> Inventory:
    doc: dict[str, Any] = {"version": 1, "hosts": {"gpu1": {
        "address": "10.0.0.1", "ssh_from": ["10.0.0.0/24"], "roles": ["gpu"],
        **(host or {})}}, "roles": {"gpu": role or {}}}
    path = tmp_path / "inv.yml"
    path.write_text(yaml.safe_dump(doc))
    return load_inventory(path)


def docker(**over: Any) -> dict[str, Any]:
    return {"uri": "https://download.docker.com/linux/ubuntu", "suites": ["jammy"],
            "components": ["stable"], "key": KEY, "fingerprint": FPR, **over}


def apt_recs(lists: int = 3, stamp: int | None = NOW - 60, gpg: bool = True,
             cands: dict[str, str] | None = None) -> list[str]:
    recs = [f"aptlists\t{lists}", f"aptnow\t{NOW}", f"aptgpg\t{'yes' if gpg else 'no'}"]
    if stamp is not None:
        recs.append(f"aptstamp\t{stamp}")
    recs += [f"cand\t{n}\t{v}" for n, v in (cands or {}).items()]
    return recs


def installed(*names: str) -> list[str]:
    return [f"pkg\t{n}\tinstall ok installed\t1.0" for n in names]


# --- inventory -----------------------------------------------------------------------

def test_a_source_loads_with_its_fingerprint_normalised(tmp_path: Path) -> None:
    spaced = " ".join(FPR[i:i + 4] for i in range(0, 40, 4)).lower()
    inv = inventory(tmp_path, {"apt_sources": {"docker": docker(fingerprint=spaced)}})
    (src,) = inv.hosts[0].apt_sources
    assert (src.name, src.fingerprint, src.suites, src.components) == (
        "docker", FPR, ("jammy",), ("stable",))
    assert inv.apt_lock_timeout == 300


def test_the_host_overrides_a_role_source_of_the_same_name(tmp_path: Path) -> None:
    inv = inventory(tmp_path, {"apt_sources": {"docker": docker(suites=["noble"])}},
                    role={"apt_sources": {"docker": docker(), "cuda": docker(
                        uri="https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64",
                        suites=["/"], components=[])}})
    got = {s.name: s.suites for s in inv.hosts[0].apt_sources}
    assert got == {"docker": ("noble",), "cuda": ("/",)}


@pytest.mark.parametrize(("field", "value", "says"), [
    ("uri", "file:///srv/repo", "invalid URL"),
    ("uri", "https://x.example/a b", "whitespace"),
    ("suites", ["jammy\nSigned-By: /tmp/k"], "invalid suite"),
    ("suites", ["../../etc"], "invalid suite"),
    ("components", ["main #"], "invalid component"),
    ("fingerprint", "G" * 40, "invalid fingerprint"),
    ("fingerprint", FPR[:-2], "invalid fingerprint"),
    ("key", KEY.replace("mDME", "mD\x1bME"), "printable"),
    ("key", KEY + "Signed-By: /etc/passwd\n", "ASCII-armored"),
    ("key", KEY.replace("mDMEZ0000", "mDME Z0000"), "not base64"),
])
def test_hostile_source_fields_are_refused_with_what_is_allowed(
        tmp_path: Path, field: str, value: Any, says: str) -> None:
    with pytest.raises(InventoryError) as e:
        inventory(tmp_path, {"apt_sources": {"docker": docker(**{field: value})}})
    text = str(e.value)
    assert f"hosts.gpu1.apt_sources.docker.{field}" in text and says in text, text


def test_the_lock_timeout_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "inv.yml"
    path.write_text("version: 1\ndefaults: {apt_lock_timeout: 0}\n")
    with pytest.raises(InventoryError, match=r"defaults\.apt_lock_timeout"):
        load_inventory(path)


# --- the step's decisions ------------------------------------------------------------

def diff(inv: Inventory, *records: str | list[str]) -> list[Any]:
    return PackagesStep(inv, inv.hosts[0]).diff(parse(answer(*records)))


def test_a_converged_host_never_refreshes_not_even_with_no_lists(tmp_path: Path) -> None:
    inv = inventory(tmp_path, {"packages": ["htop"]})
    assert diff(inv, installed("htop"), apt_recs(lists=0, stamp=None)) == []


@pytest.mark.parametrize(("recs", "reason"), [
    (apt_recs(lists=0, stamp=None), "no package lists"),
    (apt_recs(stamp=None, cands={"htop": "1"}), "package lists never refreshed by provision"),
    (apt_recs(stamp=NOW - MAX_LIST_AGE - 3600, cands={"htop": "1"}), "package lists are 25 h old"),
    (apt_recs(cands={}), "no candidate for htop"),
])
def test_lists_are_refreshed_before_an_install_when_they_cannot_serve_it(
        tmp_path: Path, recs: list[str], reason: str) -> None:
    inv = inventory(tmp_path, {"packages": ["htop"]})
    assert diff(inv, recs) == [AptUpdate(reason), InstallPackages(("htop",))]


def test_fresh_lists_with_a_candidate_install_without_a_refresh(tmp_path: Path) -> None:
    inv = inventory(tmp_path, {"packages": ["htop", "tmux"]})
    got = diff(inv, installed("tmux"), apt_recs(cands={"htop": "3.2"}))
    assert got == [InstallPackages(("htop",))]


def test_the_lock_timeout_reaches_every_apt_action(tmp_path: Path) -> None:
    path = tmp_path / "inv.yml"
    path.write_text(yaml.safe_dump({"version": 1, "defaults": {"apt_lock_timeout": 42}, "hosts": {
        "gpu1": {"address": "10.0.0.1", "packages": ["htop"]}}}))
    inv = load_inventory(path)
    assert diff(inv, apt_recs(lists=0)) == [AptUpdate("no package lists", 42),
                                             InstallPackages(("htop",), 42)]


def test_a_new_source_is_written_with_its_key_checked_then_the_lists_refreshed(tmp_path: Path) -> None:
    inv = inventory(tmp_path, {"packages": ["docker-ce"], "apt_sources": {"docker": docker()}})
    sources, install = diff(inv, apt_recs(lists=0))
    assert isinstance(sources, AptSources) and install == InstallPackages(("docker-ce",))
    assert [w.path for w in sources.writes] == [KEYFILE, SRC]
    assert [(k.source, k.path, k.fingerprint) for k in sources.keys] == [("docker", KEYFILE, FPR)]
    assert sources.uris == ("https://download.docker.com/linux/ubuntu",)
    text = sources.writes[1].content
    assert "URIs: https://download.docker.com/linux/ubuntu\nSuites: jammy\nComponents: stable\n" in text
    assert f"Signed-By: {KEYFILE}\n" in text


def test_a_source_in_place_is_left_alone(tmp_path: Path) -> None:
    inv = inventory(tmp_path, {"apt_sources": {"docker": docker()}})
    src = inv.hosts[0].apt_sources[0]
    assert diff(inv, apt_recs(), file_rec(KEYFILE, KEY), file_rec(SRC, source_file(src))) == []


def test_a_new_pin_rechecks_the_unchanged_key(tmp_path: Path) -> None:
    old = inventory(tmp_path, {"apt_sources": {"docker": docker()}}).hosts[0].apt_sources[0]
    other = "0" * 40
    inv = inventory(tmp_path, {"apt_sources": {"docker": docker(fingerprint=other)}})
    (sources,) = diff(inv, apt_recs(), file_rec(KEYFILE, KEY), file_rec(SRC, source_file(old)))
    assert isinstance(sources, AptSources)
    assert [k.fingerprint for k in sources.keys] == [other]


def test_a_source_no_longer_declared_is_removed_and_only_ours(tmp_path: Path) -> None:
    inv = inventory(tmp_path)
    (sources,) = diff(inv, apt_recs(), file_rec(SRC, "old\n"), file_rec(KEYFILE, KEY))
    assert isinstance(sources, AptSources)
    assert sources.removes == (RemoveFile(SRC, old="old\n"), RemoveFile(KEYFILE, old=KEY))
    assert sources.writes == () and sources.keys == ()


def test_without_gpg_on_the_host_a_key_is_refused_before_anything_changes(tmp_path: Path) -> None:
    inv = inventory(tmp_path, {"apt_sources": {"docker": docker()}})
    with pytest.raises(Refused, match="gpg is not installed"):
        diff(inv, apt_recs(gpg=False))


def test_without_gpg_a_bare_image_gets_it_first_when_the_inventory_asks(tmp_path: Path) -> None:
    inv = inventory(tmp_path, {"packages": ["gpg", "docker-ce"], "apt_sources": {"docker": docker()}})
    update, gpg, sources, rest = diff(inv, apt_recs(lists=0, gpg=False))
    assert (update, gpg, rest) == (AptUpdate("no package lists"), InstallPackages(("gpg",)),
                                   InstallPackages(("docker-ce",)))
    assert isinstance(sources, AptSources) and sources.keys


# --- rendering and the script --------------------------------------------------------

def test_a_flat_repository_renders_without_components(tmp_path: Path) -> None:
    inv = inventory(tmp_path, {"apt_sources": {"cuda": docker(
        uri="https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64",
        suites=["/"], components=[])}})
    text = source_file(inv.hosts[0].apt_sources[0])
    assert "Suites: /\nSigned-By: /etc/apt/keyrings/provision-cuda.asc\n" in text
    assert "Components" not in text


@pytest.mark.parametrize("bad", ["a b", "x#y", "a\nb", "", "$(id)"])
def test_the_deb822_sink_refuses_what_would_change_the_file(bad: str) -> None:
    with pytest.raises(RenderError):
        deb822_word(bad)


def test_error_and_note_markers_are_read_back() -> None:
    assert apt_script.error_line("x\n@error\tfirst\n@error\tthe one\nE: y\n") == "the one"
    assert apt_script.error_line("nothing\n") is None
    assert apt_script.notes("@step\t0\n@note\twaited 2.0 s\n@done\n") == ["waited 2.0 s"]


# --- the lab's cloud flavour ---------------------------------------------------------

def plan(image: str) -> P.LabPlan:
    return P.make_plan("t", 3, venv="/v", repo=None, image=image)


def test_the_default_flavour_is_unchanged() -> None:
    p = plan("default")
    assert [n.name for n in p.nodes] == ["operator", "bastion", "gpu1", "gpu2", "gpu3", "ns1",
                                         "resolver"]
    assert all(P.cloud_files(p, n) == {} and P.cloud_links(p, n) == {} for n in p.nodes)
    assert "ssh.socket" in P.masked_units(p.node("gpu3"), P.unmasked_units(p, p.node("gpu3")))


def test_the_cloud_flavour_makes_the_managed_hosts_look_like_a_fresh_image() -> None:
    p = plan("cloud")
    mirror = p.node("mirror")
    assert not mirror.is_container and [i.segment for i in mirror.ifaces] == ["prv"]
    assert mirror not in p.containers
    gpu1, gpu3, ns1 = p.node("gpu1"), p.node("gpu3"), p.node("ns1")
    files = P.cloud_files(p, gpu1)
    assert files["etc/ssh/sshd_config.d/50-cloud-init.conf"] == "PasswordAuthentication yes\n"
    assert "fcntl.lockf" in files[f"etc/systemd/system/{P.DPKG_LOCK_UNIT}"]
    assert P.cloud_files(p, ns1) == {}  # the DNS servers are infrastructure, not images
    assert [n.name for n in p.containers if P.socket_activated(p, n)] == ["gpu3"]
    assert "ssh.socket" not in P.masked_units(gpu3, P.unmasked_units(p, gpu3))
    assert P.cloud_links(p, gpu3)["etc/systemd/system/multi-user.target.wants/ssh.service"] is None
    assert "disable ssh.service" in P.cloud_files(p, gpu3)["etc/systemd/system-preset/10-provision-lab.preset"]


def test_the_flavour_survives_the_state_file() -> None:
    p = plan("cloud")
    assert P.plan_from_state(P.state_doc(p, {}, "up")) == p
    assert P.plan_from_state({k: v for k, v in P.state_doc(plan("default"), {}, "up").items()
                              if k != "image"}).image == "default"


def test_an_unknown_flavour_is_refused() -> None:
    with pytest.raises(P.PlanError, match="--image must be one of default, cloud"):
        plan("ubuntu")


def test_render_lays_the_sources_out_at_their_remote_paths(tmp_path: Path) -> None:
    from provision.render import render_host

    inv = inventory(tmp_path, {"apt_sources": {"docker": docker()}})
    got = {a.path: (a.kind, a.mode) for a in render_host(inv, inv.hosts[0]) if a.kind.startswith("apt")}
    assert got == {KEYFILE: ("apt-key", 0o644), SRC: ("apt-source", 0o644)}


def test_what_the_host_says_in_a_marker_is_escaped() -> None:
    assert apt_script.error_line("@error\tE: bad \x1b[31mred\x1b[0m\n") == "E: bad \\x1b[31mred\\x1b[0m"
    assert apt_script.notes("@note\twaited 1.0 s for \u202eevil\n") == ["waited 1.0 s for \\u202eevil"]


def test_the_plan_shows_the_sources_file_as_a_diff(tmp_path: Path) -> None:
    from provision.commands.converge_output import _change

    inv = inventory(tmp_path, {"apt_sources": {"docker": docker()}})
    (sources,) = diff(inv, apt_recs())
    change = _change("packages", sources)
    assert "+URIs: https://download.docker.com/linux/ubuntu\n" in change.diff
    assert f"+++ b{SRC}\n" in change.diff and change.kind == "AptSources"


def test_one_repository_under_two_names_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InventoryError) as e:
        inventory(tmp_path, {"apt_sources": {"docker2": docker(uri="https://download.docker.com/linux/ubuntu/")}},
                  role={"apt_sources": {"docker": docker()}})
    assert "hosts.gpu1.apt_sources.docker2: apt source 'docker2' repeats 'docker'" in str(e.value)
