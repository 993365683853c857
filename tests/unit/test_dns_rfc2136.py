"""The rfc2136 provider's message building and key parsing (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.dns.providers.rfc2136 import CAPABILITIES
from provision.dns.providers.rfc2136_client import Rfc2136Provider
from provision.dns.rrset import rrset
from provision.dns.tsig import read_tsig_key
from provision.dns.zone_plan import ChangeSet
from provision.errors import UsageError

SECRET = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="


def _key(tmp_path: Path, text: str) -> str:
    p = tmp_path / "k.key"
    p.write_text(text)
    return str(p)


def test_reads_bind_key_blocks_and_nsupdate_lines(tmp_path: Path) -> None:
    bind = f'key "lab-tsig" {{\n\talgorithm hmac-sha256;\n\tsecret "{SECRET}";\n}};\n'
    assert read_tsig_key(_key(tmp_path, bind)) == ("lab-tsig", "hmac-sha256", SECRET)
    assert read_tsig_key(_key(tmp_path, f"hmac-sha512:k1:{SECRET}\n")) == ("k1", "hmac-sha512", SECRET)
    # a key file is the operator's input: what is wrong with it is bad input (exit 2)
    with pytest.raises(UsageError, match="not a TSIG key"):
        read_tsig_key(_key(tmp_path, "hello"))
    with pytest.raises(UsageError, match="cannot read the TSIG key file"):
        read_tsig_key(str(tmp_path / "missing.key"))


def test_tsig_algorithms_are_bind_names_and_a_typo_lists_the_allowed(tmp_path: Path) -> None:
    typo = f'key "k" {{ algorithm hmac-shaa256; secret "{SECRET}"; }};'
    with pytest.raises(UsageError, match=r"unknown TSIG algorithm 'hmac-shaa256' \(allowed: "
                                         r"hmac-md5, hmac-sha1, hmac-sha224, hmac-sha256"):
        read_tsig_key(_key(tmp_path, typo))
    with pytest.raises(UsageError, match="secret is not base64"):
        read_tsig_key(_key(tmp_path, 'key "k" { algorithm hmac-sha256; secret "abc"; };'))
    # hmac-md5 as tsig-keygen writes it signs with its RFC 8945 wire name (dnspython has
    # no 'hmac-md5.' algorithm: before, the first signed message failed with a traceback)
    md5 = _key(tmp_path, f'key "old" {{ algorithm hmac-md5; secret "{SECRET}"; }};')
    p = Rfc2136Provider("lab.test", "127.0.0.1", 53, md5,
                        capabilities=CAPABILITIES)
    upd = p.update_message(ChangeSet((), (rrset("a.lab.test.", "A", 60, ["10.0.0.1"]),)))
    wire = upd.to_wire()
    assert b"\x08HMAC-MD5\x07SIG-ALG\x03REG\x03INT\x00" in wire


def test_a_fifo_key_file_is_refused_without_hanging(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "k.key"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        read_tsig_key(str(fifo))


def test_the_update_requires_exactly_what_was_read(tmp_path: Path) -> None:
    import dns.rdataclass
    import dns.rdatatype

    p = Rfc2136Provider("lab.test", "127.0.0.1", 53, _key(tmp_path, f"hmac-sha256:lab-tsig:{SECRET}"),
                        capabilities=CAPABILITIES)
    old = rrset("app.lab.test.", "A", 300, ["10.0.0.1", "10.0.0.2"])
    new = rrset("app.lab.test.", "A", 60, ["10.0.0.3"])
    add = rrset("www.lab.test.", "CNAME", 300, ["app.lab.test."])
    upd = p.update_message(ChangeSet((old,), (new, add)))
    # on the wire these are RRs; the server groups them by name and type into RRsets
    merged: dict[tuple[str, str, str], list[str]] = {}
    for r in upd.prerequisite:
        key = (str(r.name), dns.rdatatype.to_text(r.rdtype), dns.rdataclass.to_text(r.rdclass))
        merged.setdefault(key, []).extend(x.to_text() for x in r)
    prereq = {(*k, tuple(sorted(v))) for k, v in merged.items()}
    # value-dependent "exists" for what we read, "not exists" for what we create
    assert ("app.lab.test.", "A", "IN", ("10.0.0.1", "10.0.0.2")) in prereq
    assert ("www.lab.test.", "CNAME", "NONE", ()) in prereq
    assert len(prereq) == 2
    updates = {(str(r.name), dns.rdatatype.to_text(r.rdtype),
                dns.rdataclass.to_text(r.deleting) if r.deleting else "IN") for r in upd.update}
    assert ("app.lab.test.", "A", "ANY") in updates       # delete the RRset
    assert ("app.lab.test.", "A", "IN") in updates        # add the new one
    assert ("www.lab.test.", "CNAME", "IN") in updates
    assert upd.keyring is not None  # signed at to_wire()


def test_an_inventorys_key_file_is_checked_again_where_it_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key file of an inventory (its tree given) is read only from the tree or the
    config directory, by the real path of the file opened: a link swapped in after the
    inventory was loaded is refused (issue 34, class 3)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    tree = tmp_path / "inv"
    tree.mkdir()
    key = tree / "tsig.key"
    key.write_text(f"hmac-sha256:k1:{SECRET}\n")
    assert read_tsig_key(str(key), str(tree)) == ("k1", "hmac-sha256", SECRET)
    outside = tmp_path / "elsewhere.key"
    outside.write_text(f"hmac-sha256:k2:{SECRET}\n")
    key.unlink()
    key.symlink_to(outside)
    with pytest.raises(UsageError, match=r"its real path .*elsewhere\.key is outside the "
                                         r"inventory's directory"):
        read_tsig_key(str(key), str(tree))
    assert read_tsig_key(str(key)) == ("k2", "hmac-sha256", SECRET)  # given directly: read
