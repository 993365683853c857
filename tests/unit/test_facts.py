"""The probe's answer parsed into facts (fixtures in tests/fixtures/facts)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from provision.facts import FactsError, Request, parse, probe_script

FIX = Path(__file__).parent.parent / "fixtures" / "facts"


def read(name: str) -> str:
    return (FIX / name).read_text()


def test_fresh_host() -> None:
    f = parse(read("fresh.txt"))
    assert f.uid == 0
    assert f.absent_users == {"alice", "bob"}
    assert f.users["root"].home == "/root" and not f.users["root"].expired
    assert not f.file("/etc/systemd/system/provision-jupyter.service").exists
    assert f.dir("/srv/runs").kind == "absent"
    assert f.dir("/etc/sudoers.d").mode == 0o755
    unit = f.units["provision-jupyter.service"]
    assert unit.load_state == "not-found" and not unit.enabled and not unit.active
    assert unit.active_since is None
    assert f.packages["openssh-server"].installed and "htop" not in f.packages
    assert f.os == {"id": "ubuntu", "version_id": "22.04", "pretty_name": "Ubuntu 22.04.4 LTS"}
    assert f.docker and len(f.gpus) == 2
    assert f.gpus[0].name == "NVIDIA A100-SXM4-80GB" and f.gpus[0].memory == "81920 MiB"
    socks = {(s.address, s.port, s.process) for s in f.listening}
    assert ("0.0.0.0", 22, "sshd") in socks and ("::", 22, "sshd") in socks
    assert ("127.0.0.53", 53, "systemd-resolve") in socks
    assert "visudo" in f.has


def test_drifted_host() -> None:
    f = parse(read("drifted.txt"))
    ak = f.file("/home/alice/.ssh/authorized_keys")
    assert ak.kind == "file" and ak.mode == 0o600 and ak.owner == "alice"
    assert ak.content is not None and ak.content.startswith("# Managed by provision\n")
    assert f.temps == ("/home/alice/.ssh/.provision-tmp.Ab12Cd34Ef",)
    assert f.managed_users == ("alice", "bob", "carol")
    assert f.users["bob"].shell == "/bin/sh"
    assert not f.packages["htop"].installed
    assert [x.path for x in f.prefixed("/etc/sudoers.d/provision-")] == [
        "/etc/sudoers.d/provision-alice", "/etc/sudoers.d/provision-carol"]


def test_truncated_answer_is_refused() -> None:
    with pytest.raises(FactsError, match="truncated"):
        parse(read("truncated.txt"))


def test_not_a_probe_answer() -> None:
    with pytest.raises(FactsError, match="not a provision probe"):
        parse("sudo: a password is required\n")


def test_bad_mode_is_reported_with_its_line() -> None:
    with pytest.raises(FactsError, match="line 3: bad mode"):
        parse("probe\t1\nid\t0\nfile\t/x\tabc\t9z9\troot\troot\t1\t.\nend\n")


def test_empty_file_content() -> None:
    f = parse("probe\t1\nid\t0\nfile\t/x\te3b0\t600\troot\troot\t1\t.\nend\n")
    assert f.file("/x").content == ""


def test_request_args_merge_without_duplicates() -> None:
    a = Request(files=("/a",), users=("alice",), units=("u.service",))
    b = Request(files=("/a", "/b"), packages=("htop",))
    assert a.merge(b).args() == ["F:/a", "F:/b", "U:alice", "S:u.service", "P:htop"]


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="needs coreutils")
def test_probe_script_runs_locally_and_parses(tmp_path: Path) -> None:
    """The real probe, run by a real sh here: its answer parses (systemd parts may be empty)."""
    target = tmp_path / "managed.conf"
    target.write_text("hello\n")
    (tmp_path / ".provision-tmp.XYZ").write_text("half")
    out = subprocess.run(["sh", "-s", "--", f"F:{target}", f"F:{tmp_path}/absent",
                          f"D:{tmp_path}", "U:root", "U:no-such-user-xyz", "P:no-such-pkg-xyz"],
                         input=probe_script(), capture_output=True, text=True, check=True)
    f = parse(out.stdout)
    assert f.file(str(target)).content == "hello\n"
    assert f.file(str(target)).sha256 == (
        "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03")
    assert not f.file(f"{tmp_path}/absent").exists
    assert f.temps == (f"{tmp_path}/.provision-tmp.XYZ",)
    assert "no-such-user-xyz" in f.absent_users and f.users["root"].uid == 0
    assert "no-such-pkg-xyz" not in f.packages


def test_users_groups_match_what_id_says() -> None:
    """The users fact reads the primary group and the group list from one `id`; they must be
    what `id -gn` and `id -Gn` say, for every account here (names, numbers without names)."""
    import pwd

    names = [p.pw_name for p in pwd.getpwall()][:40]
    out = subprocess.run(["sh", "-s", "--", *(f"U:{n}" for n in names)],
                         input=probe_script(Request(users=tuple(names))), capture_output=True,
                         text=True, check=True)
    f = parse(out.stdout)
    for n in names:
        gn = subprocess.run(["id", "-gn", n], capture_output=True, text=True).stdout.strip()
        gs = subprocess.run(["id", "-Gn", n], capture_output=True, text=True).stdout.split()
        assert (f.users[n].group, list(f.users[n].groups)) == (gn, gs), n


def test_a_small_file_sends_its_bytes_and_we_take_the_digest(tmp_path: Path) -> None:
    small, big = tmp_path / "small", tmp_path / "big"
    small.write_bytes(b"caf\xc3\xa9 \xff\n")  # not UTF-8 throughout: digest of the bytes
    big.write_bytes(b"x" * 70000)
    out = subprocess.run(["sh", "-s", "--", f"F:{small}", f"F:{big}"],
                         input=probe_script(Request(files=(str(small), str(big)))),
                         capture_output=True, text=True, check=True).stdout
    assert f"file\t{small}\t=\t" in out  # no sha256sum run for it
    f = parse(out)
    assert f.file(str(small)).sha256 == hashlib.sha256(small.read_bytes()).hexdigest()
    assert f.file(str(big)).sha256 == hashlib.sha256(big.read_bytes()).hexdigest()
    assert f.file(str(big)).content is None
    with pytest.raises(FactsError, match="without digest or content"):
        parse("probe\t1\nid\t0\nfile\t/x\t=\t600\troot\troot\t1\t-\nend\n")
