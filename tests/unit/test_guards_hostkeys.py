"""Host-key verdicts (provision.ssh.hostkeys), each proven: known accepted, unknown refused
(recorded only with accept-new), changed refused always, revoked refused always. Pure
where it can be (`judge`), else against a known_hosts file in a temp dir; paramiko's own
client check is driven through the same HostKeys object that connect() hands it."""

from __future__ import annotations

import base64
from pathlib import Path

import paramiko
import pytest

from provision.ssh.errors import HostKeyError
from provision.ssh.hostkeys import (
    ACCEPT_NEW_HINT,
    KnownHosts,
    fingerprint,
    judge,
    key_name,
    known_hosts_path,
    refusal,
)
from tests.support.keys import ed25519


@pytest.fixture(scope="module")
def keys() -> dict[str, paramiko.PKey]:
    return {"a": ed25519(), "b": ed25519(), "ecdsa": paramiko.ECDSAKey.generate()}


def _line(host: str, key: paramiko.PKey, marker: str = "") -> str:
    return f"{marker + ' ' if marker else ''}{host} {key.get_name()} {key.get_base64()}\n"


# --- judge: the pure verdict ------------------------------------------------------------------

def test_judge_verdicts() -> None:
    assert judge({}, "ssh-ed25519", b"k") == "unknown"
    assert judge({"ssh-ed25519": b"k"}, "ssh-ed25519", b"k") == "known"
    assert judge({"ssh-ed25519": b"k"}, "ssh-ed25519", b"x") == "changed"
    assert judge({"ecdsa-sha2-nistp256": b"k"}, "ssh-ed25519", b"k") == "changed"
    # revoked wins over everything, known included
    assert judge({"ssh-ed25519": b"k"}, "ssh-ed25519", b"k", frozenset({b"k"})) == "revoked"
    assert judge({}, "ssh-ed25519", b"k", frozenset({b"k"})) == "revoked"
    assert judge({}, "ssh-ed25519", b"k", frozenset({b"other"})) == "unknown"


def test_names_and_paths() -> None:
    assert key_name("10.0.0.1", 22) == "10.0.0.1"
    assert key_name("10.0.0.1", 23) == "[10.0.0.1]:23"
    assert key_name("fd00::1", 2222) == "[fd00::1]:2222"
    assert fingerprint(b"k") == "SHA256:" + base64.b64encode(
        __import__("hashlib").sha256(b"k").digest()).decode().rstrip("=")
    assert not fingerprint(b"k").endswith("=")
    assert known_hosts_path(None) == Path("~/.ssh/known_hosts").expanduser()
    assert known_hosts_path("~/kh") == Path("~/kh").expanduser()
    assert known_hosts_path("/etc/kh") == Path("/etc/kh")


def test_refusal_messages(tmp_path: Path) -> None:
    kh = tmp_path / "kh"
    fp = f"ssh-ed25519 {fingerprint(b'k')}"
    assert refusal("unknown", "gpu1", "10.0.0.1", "ssh-ed25519", b"k", kh) == (
        f"gpu1: unknown host key for 10.0.0.1 ({fp}); not in {kh}; refusing")
    assert refusal("unknown", "gpu1", "10.0.0.1", "ssh-ed25519", b"k", kh, (), "hint") == (
        f"gpu1: unknown host key for 10.0.0.1 ({fp}); not in {kh}; refusing. hint")
    assert refusal("changed", "gpu1", "10.0.0.1", "ssh-ed25519", b"k", kh,
                   ("ssh-ed25519", "ssh-rsa")) == (
        f"gpu1: host key for 10.0.0.1 CHANGED: the server offered {fp}, but {kh} holds a "
        "different key (ssh-ed25519, ssh-rsa) for it; refusing (remove the old entry with "
        "`ssh-keygen -R` if the change is expected)")
    assert "holds a different key for it" in refusal("changed", "g", "h", "t", b"k", kh)
    revoked = refusal("revoked", "gpu1", "10.0.0.1", "ssh-ed25519", b"k", kh, (), "hint")
    assert revoked == (f"gpu1: host key for 10.0.0.1 is REVOKED ({fp}): {kh} marks it "
                       "@revoked; refusing")


# --- KnownHosts.check: what converge, confirm, audit and the tunnel call ----------------------

def test_known_key_is_accepted_and_nothing_written(tmp_path: Path,
                                                   keys: dict[str, paramiko.PKey]) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(_line("10.0.0.1", keys["a"]))
    KnownHosts(kh).check("gpu1", "10.0.0.1", 22, keys["a"])
    KnownHosts(kh, accept_new=True).check("gpu1", "10.0.0.1", 22, keys["a"])
    assert kh.read_text() == _line("10.0.0.1", keys["a"])


def test_unknown_key_is_refused_with_the_hint_and_nothing_written(
        tmp_path: Path, keys: dict[str, paramiko.PKey]) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(_line("10.0.0.2", keys["a"]))
    with pytest.raises(HostKeyError) as e:
        KnownHosts(kh).check("gpu1", "10.0.0.1", 22, keys["a"])
    assert str(e.value).endswith(ACCEPT_NEW_HINT) and "unknown host key for 10.0.0.1" in str(e.value)
    with pytest.raises(HostKeyError) as e:
        KnownHosts(kh, hint="use the other backend").check("gpu1", "10.0.0.1", 22, keys["a"])
    assert str(e.value).endswith("refusing. use the other backend")
    assert kh.read_text() == _line("10.0.0.2", keys["a"])


def test_unknown_key_with_accept_new_is_recorded_once_under_the_address(
        tmp_path: Path, keys: dict[str, paramiko.PKey]) -> None:
    kh = tmp_path / "sub" / "dir" / "known_hosts"
    store = KnownHosts(kh, accept_new=True)
    store.check("gpu1", "10.0.0.1", 2222, keys["a"])
    assert kh.read_text() == _line("[10.0.0.1]:2222", keys["a"])
    assert oct(kh.parent.stat().st_mode & 0o777) == "0o700"
    store.check("gpu1", "10.0.0.1", 2222, keys["a"])       # now known to this store
    KnownHosts(kh).check("gpu1", "10.0.0.1", 2222, keys["a"])  # and to the next reader
    assert kh.read_text().count("\n") == 1
    with pytest.raises(HostKeyError, match="CHANGED"):
        store.check("gpu1", "10.0.0.1", 2222, keys["b"])


@pytest.mark.parametrize("accept_new", [False, True])
def test_changed_key_is_refused_with_or_without_accept_new(
        tmp_path: Path, keys: dict[str, paramiko.PKey], accept_new: bool) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(_line("10.0.0.1", keys["a"]))
    with pytest.raises(HostKeyError, match=r"CHANGED.*\(ssh-ed25519\)"):
        KnownHosts(kh, accept_new).check("gpu1", "10.0.0.1", 22, keys["b"])
    with pytest.raises(HostKeyError, match=r"CHANGED.*\(ssh-ed25519\)"):
        KnownHosts(kh, accept_new).check("gpu1", "10.0.0.1", 22, keys["ecdsa"])
    assert kh.read_text() == _line("10.0.0.1", keys["a"])


@pytest.mark.parametrize("accept_new", [False, True])
@pytest.mark.parametrize("hosts", ["10.0.0.1", "*", "gpu9,10.0.0.*"])
def test_revoked_key_is_refused_always(tmp_path: Path, keys: dict[str, paramiko.PKey],
                                       accept_new: bool, hosts: str) -> None:
    """A key the operator marked `@revoked` (OpenSSH's known_hosts marker) is never trusted:
    not with accept-new, and not even when a plain line lists it as known too. paramiko
    skips `@revoked` lines as unparsable, so without our own reading of them the key was
    simply unknown, and accept-new recorded it."""
    kh = tmp_path / "known_hosts"
    kh.write_text(_line(hosts, keys["a"], "@revoked"))
    with pytest.raises(HostKeyError, match="REVOKED"):
        KnownHosts(kh, accept_new).check("gpu1", "10.0.0.1", 22, keys["a"])
    assert kh.read_text() == _line(hosts, keys["a"], "@revoked")
    kh.write_text(_line("10.0.0.1", keys["a"]) + _line(hosts, keys["a"], "@revoked"))
    store = KnownHosts(kh, accept_new)
    assert store.known("10.0.0.1", 22) == {}, "a revoked key must not be handed to paramiko"
    with pytest.raises(HostKeyError, match="REVOKED"):
        store.check("gpu1", "10.0.0.1", 22, keys["a"])
    # another key of the host stays usable
    kh.write_text(_line("10.0.0.1", keys["b"]) + _line(hosts, keys["a"], "@revoked"))
    KnownHosts(kh).check("gpu1", "10.0.0.1", 22, keys["b"])


def test_revoked_lines_that_do_not_parse_are_skipped(tmp_path: Path,
                                                    keys: dict[str, paramiko.PKey]) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("@revoked\n@revoked * ssh-ed25519\n@revoked * ssh-ed25519 !!!notbase64\n"
                  "@cert-authority * ssh-ed25519 AAAA\n" + _line("10.0.0.1", keys["a"]))
    KnownHosts(kh).check("gpu1", "10.0.0.1", 22, keys["a"])


def test_paramiko_client_refuses_through_the_same_store(
        tmp_path: Path, keys: dict[str, paramiko.PKey]) -> None:
    """connect() hands `store.keys` to paramiko, which judges keys it holds by itself: a
    revoked key must not be in there, a changed one must raise there."""
    kh = tmp_path / "known_hosts"
    kh.write_text(_line("10.0.0.1", keys["a"]) + _line("*", keys["b"], "@revoked"))
    store = KnownHosts(kh)
    got = store.keys.lookup("10.0.0.1")
    assert got is not None and got["ssh-ed25519"].asbytes() == keys["a"].asbytes()
    kh.write_text(_line("10.0.0.1", keys["a"]) + _line("10.0.0.1", keys["a"], "@revoked"))
    assert KnownHosts(kh).keys.lookup("10.0.0.1") is None


@pytest.mark.parametrize("bad", [
    "10.0.0.9 ssh-ed25519 AAAAB",             # paramiko: InvalidHostKey out of its loader
    "10.0.0.9 ssh-rsa AAAAB3NzaC1yc2E=",      # paramiko: ValueError out of its loader
    "10.0.0.9 ssh-ed25519 AAAA",              # paramiko skips it
    "10.0.0.9 ssh-foo AAAA",
    "10.0.0.9",
    "\udcff\udcfe garbage",
])
def test_a_line_that_does_not_parse_is_skipped_not_a_traceback(
        tmp_path: Path, keys: dict[str, paramiko.PKey], bad: str) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_bytes(bad.encode("utf-8", "surrogateescape") + b"\n"
                   + _line("10.0.0.1", keys["a"]).encode())
    store = KnownHosts(kh)
    store.check("gpu1", "10.0.0.1", 22, keys["a"])
    assert store.known("10.0.0.9", 22) == {}


def test_repeated_and_second_keys_are_kept_like_paramiko_does(
        tmp_path: Path, keys: dict[str, paramiko.PKey]) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(_line("10.0.0.1", keys["a"]) + _line("10.0.0.1,10.0.0.2", keys["a"])
                  + "# a comment\n\n" + _line("10.0.0.3", keys["b"]))
    store = KnownHosts(kh)
    assert store.known("10.0.0.1", 22) == {"ssh-ed25519": keys["a"].asbytes()}
    assert store.known("10.0.0.2", 22) == {"ssh-ed25519": keys["a"].asbytes()}
    assert store.known("10.0.0.3", 22) == {"ssh-ed25519": keys["b"].asbytes()}
    assert len(store.keys._entries) == 3  # the repeat for 10.0.0.1 added no entry of its own
    assert store.keys._entries[1].hostnames == ["10.0.0.2"]


def test_unknown_refusal_names_label_key_path_and_hint(tmp_path: Path,
                                                      keys: dict[str, paramiko.PKey]) -> None:
    kh = tmp_path / "known_hosts"
    with pytest.raises(HostKeyError) as e:
        KnownHosts(kh, hint="H").check("gpu1", "10.0.0.1", 2222, keys["a"])
    fp = fingerprint(keys["a"].asbytes())
    assert str(e.value) == (f"gpu1: unknown host key for [10.0.0.1]:2222 (ssh-ed25519 {fp}); "
                            f"not in {kh}; refusing. H")


def test_commented_out_and_unknown_marker_lines_are_never_keys(
        tmp_path: Path, keys: dict[str, paramiko.PKey]) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("#" + _line("gpu1,10.0.0.1", keys["a"])
                  + _line("@cert-authority,10.0.0.2", keys["a"])
                  + _line("@revoked,10.0.0.3", keys["a"]))
    store = KnownHosts(kh)
    for addr in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        assert store.known(addr, 22) == {}, addr


def test_a_broken_revoked_line_does_not_hide_the_next_one_and_decoding_is_lenient(
        tmp_path: Path, keys: dict[str, paramiko.PKey]) -> None:
    kh = tmp_path / "known_hosts"
    b64 = keys["a"].get_base64()
    kh.write_text("@revoked * ssh-ed25519 AAAAB\n"
                  f"@revoked * ssh-ed25519 {b64[:10]}!{b64[10:]}\n" + _line("10.0.0.1", keys["a"]))
    store = KnownHosts(kh)
    assert store.revoked == frozenset({keys["a"].asbytes()})
    with pytest.raises(HostKeyError, match="REVOKED"):
        store.check("gpu1", "10.0.0.1", 22, keys["a"])
