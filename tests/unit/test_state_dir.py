"""Local state is private state: the state directory (`provision.state`) is made 0700 and
refused when someone else owns it or group/others can write it; its files are written
through an O_EXCL|O_NOFOLLOW temp file, fsynced and renamed; lock files are never
followed through a symlink. Checked on real directories, through the journal store and
through the CLI (`provision check` reads the journals)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from provision import state
from provision.cli import main
from provision.dns.migrate.store import JournalStore


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_where_the_state_directory_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PROVISION_STATE_DIR", str(tmp_path / "s"))
    assert state.root() == tmp_path / "s"
    monkeypatch.delenv("PROVISION_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "x"))
    assert state.root() == tmp_path / "x" / "provision"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert state.root() == tmp_path / "h" / ".local" / "state" / "provision"


def test_created_0700_with_its_parents_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o000)  # the most permissive umask: os.mkdir alone would give 0777
    try:
        d = state.private_dir(tmp_path / "a" / "b" / "migrations")
    finally:
        os.umask(old)
    for p in (tmp_path / "a", tmp_path / "a" / "b", d):
        assert mode(p) == 0o700, (p, oct(mode(p)))


@pytest.mark.parametrize(("bits", "who"), [(0o770, "group"), (0o707, "others"),
                                           (0o777, "group and others")])
def test_a_writable_state_directory_is_refused(tmp_path: Path, bits: int, who: str) -> None:
    d = tmp_path / "state"
    d.mkdir()
    os.chmod(d, bits)
    with pytest.raises(state.StateDirError, match=f"writable by {who} .*chmod 700") as e:
        state.private_dir(d)
    assert e.value.exit_code == 2
    os.chmod(d, 0o755)  # readable by others is fine: nobody else can plant a file
    assert state.private_dir(d) == d


def test_a_state_directory_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    d = tmp_path / "state"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, 65534)
    with pytest.raises(state.StateDirError, match="owned by uid 65534"):
        state.private_dir(d)


def test_a_symlinked_state_directory_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(state.StateDirError, match="symlink"):
        state.private_dir(tmp_path / "link")
    (tmp_path / "file").write_text("")
    with pytest.raises(state.StateDirError, match="not a directory"):
        state.existing(tmp_path / "file")


def test_atomic_write_replaces_a_planted_symlink_never_follows_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    target = tmp_path / "journal.json"
    target.symlink_to(victim)
    state.atomic_write(target, "{}\n")
    assert victim.read_text() == "precious\n"
    assert not target.is_symlink() and target.read_text() == "{}\n" and mode(target) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_lock_file_symlink_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    lock = tmp_path / "x.lock"
    lock.symlink_to(victim)
    with pytest.raises(state.StateDirError, match="symlink"):
        state.open_lock(lock)
    os.mkfifo(tmp_path / "fifo.lock")  # opened without blocking, then refused
    with pytest.raises(state.StateDirError, match="not a regular file"):
        state.open_lock(tmp_path / "fifo.lock")
    assert victim.read_text() == "precious\n"


def test_the_journal_store_writes_only_into_a_private_directory(tmp_path: Path) -> None:
    d = tmp_path / "migrations"
    d.mkdir()
    os.chmod(d, 0o775)
    store = JournalStore(d)
    with pytest.raises(state.StateDirError, match="writable by group"), store.lock("api.example.org"):
        pass
    with pytest.raises(state.StateDirError):
        store.all()
    with pytest.raises(state.StateDirError):
        store.load("api.example.org")
    assert list(d.iterdir()) == []  # nothing written, not even the lock


def test_the_journal_store_creates_its_directory_private(tmp_path: Path) -> None:
    store = JournalStore(tmp_path / "state" / "migrations")
    with store.lock("api.example.org"):
        pass
    assert mode(tmp_path / "state") == 0o700 and mode(tmp_path / "state" / "migrations") == 0o700
    lock = next((tmp_path / "state" / "migrations").glob("*.lock"))
    assert mode(lock) == 0o600


def test_check_refuses_a_state_directory_others_can_write(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump({"version": 1, "hosts": {"gpu1": {"address": "10.0.1.21"}}}))
    sd = tmp_path / "state"
    (sd / "migrations").mkdir(parents=True)
    os.chmod(sd / "migrations", 0o777)
    monkeypatch.setenv("PROVISION_STATE_DIR", str(sd))
    r = CliRunner().invoke(main, ["check", "-i", str(inv)])
    assert r.exit_code == 2, r.output
    assert f"state directory {sd / 'migrations'} is writable by group and others" in r.stderr
    assert "Traceback" not in r.output
    os.chmod(sd / "migrations", 0o700)
    r = CliRunner().invoke(main, ["check", "-i", str(inv)])
    assert r.exit_code in (0, 1) and "state directory" not in r.output, r.output
