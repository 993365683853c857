"""Root acts by name only where nobody else can swap a name (templates/territory.sh), and as the
account whose directory it is everywhere else: a real sh and setpriv on this machine, with
`nobody` standing for a team member without sudo (issue 34)."""

from __future__ import annotations

import os
import stat
import subprocess
import threading
import time
from importlib.resources import files
from pathlib import Path

import pytest

from provision.steps import script
from provision.steps.actions import Mkdir, RemoveFile, RemoveTemps, SetAttrs, WriteFile

NOBODY = 65534
LIB = (files("provision._templates") / "territory.sh").read_text("utf-8")


def sh(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", LIB + "\n" + code, "sh", *args], capture_output=True,
                          text=True, timeout=30)


def batch(*actions: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-s"], input=script.build(list(actions)),  # type: ignore[arg-type]
                          capture_output=True, text=True, timeout=60)


def members_dir(root_dir: Path, name: str = "home") -> Path:
    d = root_dir / name
    d.mkdir(mode=0o700)
    os.chown(d, NOBODY, NOBODY)
    return d


def test_a_path_only_root_can_change_is_roots_with_its_symlinks_resolved(root_dir: Path) -> None:
    (root_dir / "real" / "sub").mkdir(parents=True)
    (root_dir / "link").symlink_to("real/sub")
    assert sh('provision_whose "$1" nobody', str(root_dir / "real")).stdout == f"root {root_dir}/real\n"
    assert sh('provision_whose "$1"', f"{root_dir}//real/./sub").stdout == f"root {root_dir}/real/sub\n"
    # a missing directory ends the walk: whoever acts creates it
    assert sh('provision_whose "$1"', str(root_dir / "real/no/such")).stdout == \
        f"root {root_dir}/real/no/such\n"
    assert sh('provision_whose "$1"', str(root_dir / "link/x")).stdout == f"root {root_dir}/real/sub/x\n"


def test_a_members_directory_is_theirs_and_nobody_elses(root_dir: Path) -> None:
    home = members_dir(root_dir)
    assert sh('provision_whose "$1" nobody', str(home / ".ssh")).stdout == f"as {NOBODY} {NOBODY}\n"
    assert sh('provision_whose "$1"', str(home)).stdout == f"as {NOBODY} {NOBODY}\n"
    r = sh('provision_whose "$1" root', str(home / ".ssh"))
    assert r.returncode != 0 and r.stdout == ""
    assert f"{home} belongs to uid {NOBODY} (nobody), who could swap a name under root" in r.stderr
    # their symlink in a directory of root's is theirs too: it is never followed as root
    (root_dir / "theirs").symlink_to("/etc")
    os.chown(root_dir / "theirs", NOBODY, NOBODY, follow_symlinks=False)
    assert sh('provision_whose "$1" nobody', str(root_dir / "theirs")).stdout == f"as {NOBODY} {NOBODY}\n"
    assert sh('provision_whose "$1" root', str(root_dir / "theirs")).returncode != 0


@pytest.mark.parametrize("mode", [0o1777, 0o775, 0o757, 0o2770])
def test_a_shared_directory_is_nobodys(root_dir: Path, mode: int) -> None:
    shared = root_dir / "shared"
    shared.mkdir()
    os.chmod(shared, mode)
    r = sh('provision_whose "$1" root', str(shared / "x"))
    assert r.returncode != 0 and r.stdout == ""
    assert f"{shared} is writable by others than root (mode {mode:o})" in r.stderr


def test_a_file_on_the_path_is_refused(root_dir: Path) -> None:
    (root_dir / "f").write_text("")
    r = sh('provision_whose "$1"', str(root_dir / "f" / "x"))
    assert r.returncode != 0 and f"{root_dir}/f is not a directory" in r.stderr


def test_writes_in_a_members_directory_are_made_as_the_member(root_dir: Path) -> None:
    home = members_dir(root_dir)
    keys = home / ".ssh" / "authorized_keys"
    r = batch(Mkdir(str(home / ".ssh"), 0o700, "nobody", "nogroup"),
              WriteFile(str(keys), "# Managed by provision\nssh-ed25519 AAAA\n", 0o600, "nobody", "nogroup"))
    assert r.returncode == 0, r.stderr
    for p, mode in ((home / ".ssh", 0o700), (keys, 0o600)):
        st = p.lstat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (NOBODY, NOBODY, mode)
    assert keys.read_text() == "# Managed by provision\nssh-ed25519 AAAA\n"
    r = batch(SetAttrs(str(keys), 0o640, "nobody", "nogroup"), RemoveFile(str(home / ".ssh" / "gone")))
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(keys.stat().st_mode) == 0o640


def test_a_member_who_points_their_ssh_dir_at_roots_files_gets_nothing_written_there(
        root_dir: Path) -> None:
    home = members_dir(root_dir)
    system = root_dir / "etc-sudoers.d"
    system.mkdir()
    (system / "keep").write_text("root's\n")
    (home / ".ssh").symlink_to(system)
    os.chown(home / ".ssh", NOBODY, NOBODY, follow_symlinks=False)
    r = batch(WriteFile(str(home / ".ssh" / "authorized_keys"), "x\n", 0o600, "nobody", "nogroup"))
    assert r.returncode != 0 and "Permission denied" in r.stderr, r.stderr
    r = batch(SetAttrs(str(home / ".ssh" / "keep"), 0o666, "nobody", "nogroup"))
    assert r.returncode != 0
    r = batch(RemoveFile(str(home / ".ssh" / "keep")),
              RemoveTemps((str(home / ".ssh" / ".provision-tmp.x"),)))
    assert r.returncode != 0
    assert sorted(p.name for p in system.iterdir()) == ["keep"]
    st = (system / "keep").stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode), (system / "keep").read_text()) == (0, 0o644, "root's\n")
    # a file for root is never put in a member's directory
    r = batch(WriteFile(str(home / "sudoers"), "x\n", 0o440, "root", "root"))
    assert r.returncode != 0 and "belongs to uid 65534" in r.stderr


def test_what_runs_as_the_member_holds_none_of_the_batchs_descriptors(root_dir: Path) -> None:
    r = sh("exec 3>/dev/null 8>/dev/null 9>/dev/null; "
           "provision_as 65534 65534 sh -c 'for n in 0 1 2 3 8 9; do [ -e /proc/$$/fd/$n ] && echo $n; done; true'")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "1", "2"], r.stdout
    r = sh("provision_as 65534 65534 sh -c 'id -u; grep NoNewPrivs /proc/self/status'")
    assert r.stdout.split() == ["65534", "NoNewPrivs:", "1"]


def test_a_racing_member_never_gets_root_to_write_or_chown_outside_their_home(root_dir: Path) -> None:
    """The attack of issue 34: the member swaps the temp file and ~/.ssh for symlinks to a
    system file while root rewrites their keys, as fast as they can, many times."""
    home = members_dir(root_dir)
    ssh_dir = home / ".ssh"
    victim = root_dir / "sudoers"
    victim.write_text("root ALL=(ALL) ALL\n")
    os.chmod(victim, 0o440)
    racer = subprocess.Popen(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "sh", "-c", """
        cd "$1" || exit 1
        while :; do
          for t in .ssh/.provision-tmp.*; do ln -sfn "$2" "$t" 2>/dev/null; done
          mv -f .ssh .ssh-real 2>/dev/null; ln -sfn "$(dirname "$2")" .ssh 2>/dev/null
          rm -f .ssh 2>/dev/null; mv -f .ssh-real .ssh 2>/dev/null; mkdir -p .ssh 2>/dev/null
        done""", "racer", str(home), str(victim)])
    stop = threading.Event()
    try:
        ok = 0
        deadline = time.monotonic() + 120
        for i in range(150):
            r = batch(Mkdir(str(ssh_dir), 0o700, "nobody", "nogroup"),
                      WriteFile(str(ssh_dir / "authorized_keys"), f"key {i}\n", 0o600, "nobody", "nogroup"))
            ok += r.returncode == 0
            st = victim.stat()
            assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o440), r.stderr
            assert victim.read_text() == "root ALL=(ALL) ALL\n"
            assert time.monotonic() < deadline
    finally:
        stop.set()
        racer.kill()
        racer.wait()
    assert sorted(p.name for p in root_dir.iterdir()) == ["home", "sudoers"]
    assert ok > 0  # the race did not stop every write: the writes really ran beside it


def probe(*args: str) -> str:
    from provision.facts import probe_script

    return subprocess.run(["sh", "-s", "--", *args], input=probe_script(), capture_output=True,
                          text=True, check=True, timeout=60).stdout


def test_the_probe_reads_a_members_files_as_the_member(root_dir: Path) -> None:
    from provision.facts import parse

    home = members_dir(root_dir)
    secret = root_dir / "shadow"
    secret.write_text("root:$y$s3cr3t-0f-r00t\n")
    os.chmod(secret, 0o600)
    (home / "mine").write_text("# Managed by provision\nkey\n")
    os.chown(home / "mine", NOBODY, NOBODY)
    (home / "link").symlink_to(secret)
    os.chown(home / "link", NOBODY, NOBODY, follow_symlinks=False)
    os.mkfifo(home / "fifo")
    os.chown(home / "fifo", NOBODY, NOBODY)
    (home / ".provision-tmp.abc").write_text("")
    out = probe(f"F:{home}/mine", f"F:{home}/link", f"F:{home}/fifo", f"D:{home}")
    assert "s3cr3t-0f-r00t" not in out
    f = parse(out)
    assert f.file(f"{home}/mine").content == "# Managed by provision\nkey\n"
    assert f.file(f"{home}/mine").owner == "nobody"
    assert f.file(f"{home}/link").kind == "other" and f.file(f"{home}/fifo").kind == "other"
    assert f.temps == (f"{home}/.provision-tmp.abc",)
    # a file in a directory everybody may write is read by nobody: not a file to the plan
    shared = root_dir / "shared"
    shared.mkdir(mode=0o1777)
    os.chmod(shared, 0o1777)
    (shared / "f").write_text("x")
    assert parse(probe(f"F:{shared}/f")).file(f"{shared}/f").kind == "other"


def test_what_the_member_prints_is_held_to_the_records_asked_for(root_dir: Path) -> None:
    """A process running as the member could be made (ptrace) to print anything: only the
    records for the paths asked for come back."""
    home = members_dir(root_dir)
    forged = ("printf 'file\\t/etc/sudoers\\t=\\t440\\troot\\troot\\t1\\t1\\t.\\n'; "
              "printf 'user\\troot\\t0\\troot\\t/root\\t/bin/sh\\t-\\troot\\n'; printf 'end\\n'; "
              f"printf 'managed\\tsomeone\\n'; printf 'tmp\\t/etc/.provision-tmp.x\\n'; "
              f"printf 'dir\\t{home}\\t700\\tnobody\\tnogroup\\n'; "
              f"printf 'dir\\t{home}\\t777\\troot\\troot\\n'; "
              f"printf 'tmp\\t{home}/.provision-tmp.ok\\n'")
    code = ("T=$(printf '\\t')\n" + (files("provision._templates") / "facts" / "lib.sh").read_text()
            + f"\nFACT_PATHS={forged!r}\nfact_at D:{home}\n")
    out = sh(code).stdout
    assert out == f"dir\t{home}\t700\tnobody\tnogroup\ntmp\t{home}/.provision-tmp.ok\n"


def test_a_safe_path_is_one_in_a_directory_only_root_changes(root_dir: Path) -> None:
    """`provision_safe_path FILE` (apt's sources and keys, python envs' root): the file's
    directory must be root's alone; the file itself may be there or not."""
    from provision.steps.script import SAFE_PATH
    files_lib = (files("provision._templates") / "steps" / "files.sh").read_text("utf-8")
    (root_dir / "keyrings").mkdir()
    (root_dir / "keyrings" / "k.asc").write_text("key")
    home = members_dir(root_dir)
    code = files_lib + "\n" + SAFE_PATH + '\nprovision_safe_path "$1"'
    for path, ok in ((root_dir / "keyrings" / "k.asc", True), (root_dir / "keyrings" / "new", True),
                     (home / "k.asc", False)):
        r = sh(code, str(path))
        assert (r.returncode == 0) == ok, (path, r.stderr)


def test_a_members_directory_that_is_a_symlink_is_refused_naming_it(root_dir: Path) -> None:
    home = members_dir(root_dir)
    (home / ".ssh").symlink_to("/etc")
    os.chown(home / ".ssh", NOBODY, NOBODY, follow_symlinks=False)
    r = batch(Mkdir(str(home / ".ssh"), 0o700, "nobody", "nogroup"))
    assert r.returncode != 0
    assert f"refusing {home}/.ssh: it is a symlink (to /etc), not what provision manages there" in r.stderr
