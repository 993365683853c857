"""The one host-key trust path: unknown refused, accept-new records, other type or changed
key refused, and lookups by address only (never by the inventory's name for the host)."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from provision.ssh.errors import HostKeyError
from provision.ssh.hostkeys import KnownHosts, judge, key_name
from tests.support.keys import ed25519

_KEYS: dict[tuple[Path, str], paramiko.PKey] = {}


def _key(tmp_path: Path, name: str = "hostkey") -> paramiko.PKey:
    """The key `name` of this test (the same one when asked again), made in-process."""
    return _KEYS.setdefault((tmp_path, name), ed25519())


def test_judge_is_pure() -> None:
    assert judge({}, "ssh-ed25519", b"k") == "unknown"
    assert judge({"ssh-ed25519": b"k"}, "ssh-ed25519", b"k") == "known"
    assert judge({"ssh-ed25519": b"k"}, "ssh-ed25519", b"other") == "changed"
    assert judge({"ecdsa-sha2-nistp256": b"e"}, "ssh-ed25519", b"k") == "changed"


def test_openssh_spelling_of_names() -> None:
    assert key_name("10.0.0.1", 22) == "10.0.0.1"
    assert key_name("fd00::1", 2222) == "[fd00::1]:2222"


def test_unknown_key_refused_with_a_hint(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    with pytest.raises(HostKeyError, match=r"unknown host key.*--accept-new"):
        KnownHosts(kh).check("gpu1", "10.0.0.1", 22, _key(tmp_path))
    assert not kh.exists()


def test_accept_new_appends_like_openssh(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    key = _key(tmp_path)
    KnownHosts(kh, accept_new=True).check("gpu1", "10.0.0.1", 2222, key)
    assert kh.read_text() == f"[10.0.0.1]:2222 ssh-ed25519 {key.get_base64()}\n"
    KnownHosts(kh).check("gpu1", "10.0.0.1", 2222, key)  # now known, without accept-new


def test_key_of_another_type_is_treated_as_changed(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    old = paramiko.ECDSAKey.generate()
    kh.write_text(f"10.0.0.1 {old.get_name()} {old.get_base64()}\n")
    with pytest.raises(HostKeyError, match=r"CHANGED.*different key"):
        KnownHosts(kh, accept_new=True).check("gpu1", "10.0.0.1", 22, _key(tmp_path))
    assert kh.read_text().count("\n") == 1


def test_changed_key_refused_even_with_accept_new(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(f"10.0.0.1 ssh-ed25519 {_key(tmp_path, 'old').get_base64()}\n")
    with pytest.raises(HostKeyError, match="CHANGED"):
        KnownHosts(kh, accept_new=True).check("gpu1", "10.0.0.1", 22, _key(tmp_path))


def test_a_key_stored_under_the_inventory_name_is_not_trusted(tmp_path: Path) -> None:
    """The paramiko tunnel used to accept a key recorded under `gpu1`; OpenSSH (which the
    tunnel's default backend and converge follow) looks up the address only."""
    kh = tmp_path / "known_hosts"
    key = _key(tmp_path)
    kh.write_text(f"gpu1 ssh-ed25519 {key.get_base64()}\n")
    with pytest.raises(HostKeyError, match="unknown host key"):
        KnownHosts(kh).check("gpu1", "10.0.0.1", 22, key)


def test_a_rewritten_file_is_read_again_even_at_the_same_size(tmp_path: Path) -> None:
    """known_hosts is parsed once per version of the file and shared by a run's hosts; a key
    replaced in place (same length: `ssh-keygen -R` and a re-add) must not be served stale."""
    kh = tmp_path / "known_hosts"
    old, new = _key(tmp_path, "old"), _key(tmp_path, "new")
    kh.write_text(f"10.0.0.1 ssh-ed25519 {old.get_base64()}\n")
    assert KnownHosts(kh).known("10.0.0.1", 22) == {"ssh-ed25519": old.asbytes()}
    assert KnownHosts(kh).keys is KnownHosts(kh).keys  # one parse for the same version
    kh.write_text(f"10.0.0.1 ssh-ed25519 {new.get_base64()}\n")
    assert KnownHosts(kh).known("10.0.0.1", 22) == {"ssh-ed25519": new.asbytes()}
    with pytest.raises(HostKeyError, match="CHANGED"):
        KnownHosts(kh).check("gpu1", "10.0.0.1", 22, old)
    kh.unlink()
    assert KnownHosts(kh).known("10.0.0.1", 22) == {}
