"""apt, the host side run here: the batch with every apt action checked by sh, the signing-key
check with a real gpg, the dpkg-lock wait against a real fcntl lock."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from provision.steps import apt_script, script
from provision.steps.actions import AptUpdate
from tests.support.probe_records import file_rec
from tests.unit.test_apt import FPR, KEY, apt_recs, diff, docker, inventory

# --- rendering and the script --------------------------------------------------------


def test_the_batch_with_every_apt_action_is_valid_sh(tmp_path: Path) -> None:
    inv = inventory(tmp_path, {"packages": ["docker-ce"], "apt_sources": {"docker": docker()}})
    actions = diff(inv, apt_recs(lists=0), file_rec("/etc/apt/sources.list.d/provision-gone.sources", "x"))
    text = script.build([*actions, AptUpdate("x")])
    subprocess.run(["sh", "-n"], input=text, text=True, check=True)
    # keys are checked, and the lock waited for, before any file is backed up or replaced
    body = text[text.index("exec 3>&1 1>&2"):]
    first_put = body.index("provision_apt_put /var")
    assert body.index("provision_apt_key_check /var") < body.index("provision_apt_wait ") \
        < body.index("provision_apt_backup 0") < first_put
    assert "provision_apt_update 300 https://download.docker.com/linux/ubuntu" in body


needs_gpg = pytest.mark.skipif(not shutil.which("gpg"), reason="gpg not installed")


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, Path]]:
    """Two real keys (fingerprint, armored file) and a file holding both."""
    d = tmp_path_factory.mktemp("gpg")
    out: dict[str, tuple[str, Path]] = {}
    for name in ("ours", "theirs"):
        home = d / name
        home.mkdir(mode=0o700)
        g = ["gpg", "--homedir", str(home), "--batch", "--no-tty"]
        subprocess.run([*g, "--passphrase", "", "--quick-gen-key", f"{name} <{name}@lab.test>",
                        "ed25519", "sign", "never"], check=True, capture_output=True)
        listing = subprocess.run([*g, "--with-colons", "--list-keys"], check=True,
                                 capture_output=True, text=True).stdout
        fpr = next(x.split(":")[9] for x in listing.splitlines() if x.startswith("fpr:"))
        (d / f"{name}.asc").write_bytes(subprocess.run([*g, "--armor", "--export", fpr],
                                                       check=True, capture_output=True).stdout)
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], check=False)
        out[name] = (fpr, d / f"{name}.asc")
    (d / "both.asc").write_bytes(out["ours"][1].read_bytes() + out["theirs"][1].read_bytes())
    out["both"] = (out["ours"][0], d / "both.asc")
    return out


def key_check(path: Path, fingerprint: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", apt_script.LIB + '\nprovision_apt_key_check "$1" "$2" lab',
                           "sh", str(path), fingerprint], capture_output=True, text=True)


@needs_gpg
def test_the_host_side_key_check_accepts_the_pinned_key(keys: dict[str, tuple[str, Path]]) -> None:
    fpr, path = keys["ours"]
    r = key_check(path, fpr)
    assert (r.returncode, r.stderr) == (0, "")


@needs_gpg
def test_the_host_side_key_check_refuses_another_key(keys: dict[str, tuple[str, Path]]) -> None:
    theirs, path = keys["theirs"]
    r = key_check(path, keys["ours"][0])
    assert r.returncode == 1
    assert apt_script.error_line(r.stderr) == (
        f"apt source lab: the signing key has fingerprint {theirs}, the inventory pins "
        f"{keys['ours'][0]}; refused, nothing installed")


@needs_gpg
def test_the_host_side_key_check_refuses_a_second_key_riding_along(
        keys: dict[str, tuple[str, Path]]) -> None:
    fpr, path = keys["both"]
    r = key_check(path, fpr)
    assert r.returncode == 1
    assert "holds 2 primary keys" in (apt_script.error_line(r.stderr) or ""), r.stderr


@needs_gpg
def test_the_host_side_key_check_refuses_garbage(tmp_path: Path) -> None:
    (tmp_path / "k.asc").write_text(KEY)  # armored, but no key inside
    r = key_check(tmp_path / "k.asc", FPR)
    assert r.returncode == 1 and "holds 0 primary keys" in (apt_script.error_line(r.stderr) or "")


# --- the dpkg lock, with a real fcntl lock on a file of our own ----------------------

HOLD = """
import fcntl, sys, time
f = open(sys.argv[1], 'a')
fcntl.lockf(f, fcntl.LOCK_EX)
print('held', flush=True)
time.sleep(float(sys.argv[2]))
"""


def lock_shell(lock: Path, body: str) -> subprocess.CompletedProcess[str]:
    lib = apt_script.LIB.replace(" ".join(apt_script.LOCKS), str(lock))
    assert lib != apt_script.LIB
    return subprocess.run(["sh", "-c", f"{lib}\nexec 3>&1\n{body}"], capture_output=True,
                          text=True, timeout=60)


def hold(lock: Path, seconds: float) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), str(seconds)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline() == "held\n"
    return p


def test_the_holder_of_an_fcntl_lock_is_named_and_a_free_lock_is_not(tmp_path: Path) -> None:
    lock = tmp_path / "lock-frontend"
    lock.touch()
    assert lock_shell(lock, "provision_apt_holder").stdout == ""
    p = hold(lock, 30)
    try:
        said = lock_shell(lock, "provision_apt_holder").stdout
    finally:
        p.kill()
        p.wait()
    assert re.fullmatch(rf"python[0-9.]* \(pid {p.pid}, {re.escape(str(lock))}\)", said), said


def test_a_lock_held_past_the_timeout_fails_in_one_line(tmp_path: Path) -> None:
    lock = tmp_path / "lock-frontend"
    p = hold(lock, 60)
    try:
        r = lock_shell(lock, "provision_apt_wait 1")
    finally:
        p.kill()
        p.wait()
    assert r.returncode == 1
    error = apt_script.error_line(r.stderr) or ""
    assert error.startswith("the dpkg lock is still held by ") and f"(pid {p.pid}, {lock}) after 1 s" in error
    assert apt_script.notes(r.stdout) == []


def test_a_lock_let_go_in_time_is_waited_for_and_the_wait_reported(tmp_path: Path) -> None:
    lock = tmp_path / "lock-frontend"
    p = hold(lock, 0.5)
    r = lock_shell(lock, "provision_apt_wait 30; echo left=$PROVISION_APT_LEFT")
    p.wait()
    assert r.returncode == 0, r.stderr
    (note,) = apt_script.notes(r.stdout)
    assert re.fullmatch(rf"waited \d+\.\d s for the dpkg lock \(held by python[0-9.]* "
                        rf"\(pid {p.pid}, {re.escape(str(lock))}\)\)", note), note
    left = int(r.stdout.rsplit("left=", 1)[1])
    assert 1 <= left <= 30
