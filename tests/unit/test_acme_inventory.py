"""The inventory's `acme:` section: defaults, known CAs, local files resolved."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.inventory import Inventory, InventoryError, load_inventory
from provision.inventory.acme import KNOWN_CAS


def _load(tmp_path: Path, body: str) -> Inventory:
    inv = tmp_path / "inv.yml"
    inv.write_text("version: 1\n" + body)
    return load_inventory(inv)


def test_no_section_is_none(tmp_path: Path) -> None:
    assert _load(tmp_path, "").acme is None


def test_default_ca_is_lets_encrypt(tmp_path: Path) -> None:
    acme = _load(tmp_path, "acme: {}\n").acme
    assert acme is not None
    assert acme.directory == KNOWN_CAS["letsencrypt"]
    assert acme.caa_identities == ("letsencrypt.org",)
    assert acme.email is None and acme.eab_kid is None


def test_url_bundle_and_eab_resolved_beside_the_inventory(tmp_path: Path) -> None:
    acme = _load(tmp_path, "acme:\n  ca: https://10.0.0.5:14000/dir\n  email: ops@example.org\n"
                 "  ca_bundle: pebble.pem\n  caa_identities: [pebble.lab.test]\n"
                 "  eab: {kid: kid-1, hmac_key_file: keys/eab.key}\n").acme
    assert acme is not None
    assert acme.directory == "https://10.0.0.5:14000/dir"
    assert acme.ca_bundle == str(tmp_path / "pebble.pem")
    assert acme.eab_hmac_key_file == str(tmp_path / "keys/eab.key")
    assert acme.caa_identities == ("pebble.lab.test",)


@pytest.mark.parametrize("url", ["http://127.0.0.1:14000/dir", "http://[::1]/dir",
                                 "http://localhost:4001/directory"])
def test_plain_http_only_to_loopback(tmp_path: Path, url: str) -> None:
    acme = _load(tmp_path, f"acme: {{ca: '{url}'}}\n").acme
    assert acme is not None and acme.directory == url


@pytest.mark.parametrize("url", ["http://10.0.0.5/dir", "ftp://acme.example.net/dir"])
def test_other_schemes_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(InventoryError) as e:
        _load(tmp_path, f"acme: {{ca: '{url}'}}\n")
    assert "acme.ca" in str(e.value)
