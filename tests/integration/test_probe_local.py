"""The real probe script run by a real sh on this machine, its answer parsed.

The parse of recorded answers, fact by fact, is in tests/facts (fixtures).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from provision.facts import Request, parse, probe_script


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="needs coreutils")
def test_probe_script_runs_locally_and_parses(root_dir: Path) -> None:
    """The real probe, run by a real sh here: its answer parses (systemd parts may be empty)."""
    tmp_path = root_dir
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


def test_a_small_file_sends_its_bytes_and_we_take_the_digest(root_dir: Path) -> None:
    tmp_path = root_dir
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
