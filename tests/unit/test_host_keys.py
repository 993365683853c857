"""The host-key policy: unknown refused, accept-new records, other key type refused."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from provision.hosts.connect import HostKeyError, RefuseUnknown


class FakeClient:
    def __init__(self, keys: paramiko.HostKeys):
        self.keys = keys

    def get_host_keys(self) -> paramiko.HostKeys:
        return self.keys


def test_unknown_key_refused_with_a_hint(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    key = paramiko.Ed25519Key.from_private_key_file(_keyfile(tmp_path))
    with pytest.raises(HostKeyError, match="--accept-new"):
        RefuseUnknown(kh, False, "gpu1").missing_host_key(FakeClient(paramiko.HostKeys()),
                                                          "[10.0.0.1]:22", key)
    assert not kh.exists()


def test_accept_new_appends_like_openssh(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    key = paramiko.Ed25519Key.from_private_key_file(_keyfile(tmp_path))
    keys = paramiko.HostKeys()
    RefuseUnknown(kh, True, "gpu1").missing_host_key(FakeClient(keys), "10.0.0.1", key)
    assert kh.read_text() == f"10.0.0.1 ssh-ed25519 {key.get_base64()}\n"
    reread = paramiko.HostKeys(str(kh))
    assert reread.lookup("10.0.0.1")["ssh-ed25519"] == key


def test_key_of_another_type_is_treated_as_changed(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    old = paramiko.ECDSAKey.generate()
    keys = paramiko.HostKeys()
    keys.add("10.0.0.1", old.get_name(), old)
    key = paramiko.Ed25519Key.from_private_key_file(_keyfile(tmp_path))
    with pytest.raises(HostKeyError, match="different key"):
        RefuseUnknown(kh, True, "gpu1").missing_host_key(FakeClient(keys), "10.0.0.1", key)
    assert not kh.exists()


def _keyfile(tmp_path: Path) -> str:
    import subprocess

    path = tmp_path / "hostkey"
    if not path.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return str(path)
