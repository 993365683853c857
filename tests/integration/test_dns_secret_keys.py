"""A PowerDNS API key from the inventory's secrets (`api_key_secret`), against the real
PowerDNS Authoritative Server on 127.0.0.1 (tests/support/powerdns_server.py): decrypted
only by the commands that talk to the server, sent only to the server its value is bound
to, and printed nowhere. (The TSIG key from a secret is tested against the lab's BIND:
tests/lab/test_secrets.py.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.dns.secret_keys import api_key, tsig_key
from provision.errors import OperationError
from tests.support.powerdns_server import Pdns

pytestmark = pytest.mark.skipif(shutil.which("age") is None or shutil.which("ssh-keygen") is None,
                                reason="needs age and ssh-keygen")



def _key(tmp: Path, name: str) -> tuple[Path, str]:
    path = tmp / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)],
                   check=True)
    return path, (tmp / f"{name}.pub").read_text().strip()


def _inventory(tmp: Path, pub: str, pdns: Pdns, zone: str, value: str) -> Path:
    armored = subprocess.run(["age", "--encrypt", "--armor", "-r", pub], input=value.encode(),
                             capture_output=True, check=True).stdout.decode()
    doc: dict[str, Any] = {
        "version": 1, "team": {"alice": {"keys": [pub]}},
        "secrets": {"pdns_key": armored},
        "dns": {"zones": {zone.rstrip("."): {
            "provider": "powerdns", "api_url": pdns.url, "api_key_secret": "pdns_key",
            "dns_address": "127.0.0.1", "dns_port": pdns.dns_port,
            "records": {"api": {"type": "A", "values": ["127.0.0.10"], "ttl": 120}}}}}}
    path = tmp / "inventory.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _cli(*args: str, identity: Path) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "provision", *args], capture_output=True,
                          text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(identity.parent),
                               "PROVISION_IDENTITY": str(identity)})
    return done.returncode, done.stdout + done.stderr


def test_the_api_key_comes_from_a_secret_bound_to_its_server(pdns: Pdns, tmp_path: Path) -> None:
    zone = "secretkey.example.org."
    pdns.create_zone(zone)
    try:
        alice, pub = _key(tmp_path, "alice")
        inv = str(_inventory(tmp_path, pub, pdns, zone, f"{pdns.url} {pdns.key}\n"))
        outputs = []
        # check names where the key comes from and decrypts nothing (no identity file)
        code, out = _cli("check", "-i", inv, identity=tmp_path / "absent")
        outputs.append(out)
        assert code == 0 and f"API key from secret pdns_key, sent to {pdns.url}" in out, out
        # dns apply decrypts it (no $PROVISION_POWERDNS_API_KEY anywhere) and the server
        # answers what the inventory says; then nothing is left to do
        code, out = _cli("dns", "apply", "-i", inv, "--yes", identity=alice)
        outputs.append(out)
        assert code == 0, out
        assert pdns.query(f"api.{zone}", "A") == ("NOERROR", ["127.0.0.10"], True, 120)
        for extra in ((), ("--json",)):
            code, out = _cli("dns", "plan", "-i", inv, "--detailed-exitcode", *extra,
                             identity=alice)
            outputs.append(out)
            assert code == 0, out
        # a key bound to another server is not sent to this one: exit 1, nothing changed
        other = _inventory(tmp_path, pub, pdns, zone, f"http://127.0.0.1:1 {pdns.key}")
        code, out = _cli("dns", "plan", "-i", str(other), identity=alice)
        outputs.append(out)
        assert code == 1 and "bound to another server" in out, out
        # a key that does not decrypt with the operator's: exit 1, naming whom it is for
        carol, _ = _key(tmp_path, "carol")
        code, out = _cli("dns", "plan", "-i", inv, identity=carol)
        outputs.append(out)
        assert code == 1 and "encrypted to: alice" in out, out
        leaked = [o for o in outputs if pdns.key in o]
        assert leaked == []
    finally:
        pdns.delete_zone(zone)


def test_the_parsers_name_the_secret_and_never_quote_its_value() -> None:
    url = "https://pdns.example.net:8081"
    assert api_key("k", b"https://PDNS.example.net:8081/ abc123\n", url) == "abc123"
    assert api_key("k", b"https://pdns.example.net:8081 abc123", url + "/api") == "abc123"
    for value in (b"abc123", b"https://pdns.example.net:8082 abc123", b"abc123 https://pdns.example.net:8081",
                  b"http://pdns.example.net:8081 abc123", b"https://pdns.example.net:8081 abc123 x",
                  b"https://pdns.example.net:8081 abc\xff123"):
        with pytest.raises(OperationError) as e:
            api_key("k", value, url)
        assert "abc" not in str(e.value) and "secret 'k'" in str(e.value), (value, e.value)
    assert tsig_key("t", b"hmac-sha256:lab-key:c2VjcmV0") == ("lab-key", "hmac-sha256", "c2VjcmV0")
    for value in (b"hmac-sha256:lab-key", b"SECRETALG:lab-key:c2VjcmV0", b"hmac-sha256:SECRET NAME:x",
                  b"\xff"):
        with pytest.raises(OperationError) as e:
            tsig_key("t", value)
        assert "SECRET" not in str(e.value) and "secret 't' is not a usable TSIG key" in str(e.value)


def test_the_acme_eab_key_comes_from_a_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """acme.eab.hmac_key_secret: decrypted with the operator's key only when the account is
    registered (never at load); a stranger's key cannot open it (issue 37, uses inside
    provision)."""
    from provision.acme.issue import eab_hmac
    from provision.inventory import load_inventory

    key, pub = _key(tmp_path, "alice")
    stranger, _ = _key(tmp_path, "mallory")
    armored = subprocess.run(["age", "--encrypt", "--armor", "-r", pub],
                             input=b"c2VjcmV0LWhtYWMta2V5\n", capture_output=True,
                             check=True).stdout.decode()
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({
        "version": 1, "team": {"alice": {"keys": [pub]}}, "secrets": {"eab_hmac": armored},
        "acme": {"ca": "https://acme.example.net/directory",
                 "eab": {"kid": "kid-1", "hmac_key_secret": "eab_hmac"}}}))
    monkeypatch.setenv("PROVISION_IDENTITY", str(key))
    inv = load_inventory(path)
    assert inv.acme is not None and inv.acme.eab_hmac_key_secret == "eab_hmac"
    assert "c2VjcmV0" not in repr(inv.acme)  # the model holds the name, not the value
    assert eab_hmac(inv, inv.acme) == "c2VjcmV0LWhtYWMta2V5"
    monkeypatch.setenv("PROVISION_IDENTITY", str(stranger))
    with pytest.raises(OperationError) as e:
        eab_hmac(load_inventory(path), inv.acme)
    assert "c2VjcmV0" not in str(e.value)


def test_cloud_dns_credentials_come_from_a_secret(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """clouddns.credentials_secret: the service-account key decrypted where the provider is
    made and turned into google-auth credentials without a file; a value that is no key is
    bad input naming the secret, never quoting it; `check` decrypts nothing."""
    import json as _json

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from provision.dns.provider import provider_for as make_provider
    from provision.errors import UsageError
    from provision.inventory import load_inventory

    pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode()
    sa = {"type": "service_account", "client_email": "dns@lab-project.iam.gserviceaccount.com",
          "private_key": pem, "token_uri": "https://oauth2.googleapis.com/token",
          "project_id": "lab-project"}
    key, pub = _key(tmp_path, "alice")

    def inventory(value: bytes) -> Path:
        armored = subprocess.run(["age", "--encrypt", "--armor", "-r", pub], input=value,
                                 capture_output=True, check=True).stdout.decode()
        path = tmp_path / "inventory.yml"
        path.write_text(yaml.safe_dump({
            "version": 1, "team": {"alice": {"keys": [pub]}}, "secrets": {"gcp_dns": armored},
            "dns": {"zones": {"example.org": {"provider": "clouddns", "project": "lab-project",
                                              "managed_zone": "example-org",
                                              "credentials_secret": "gcp_dns"}}}}))
        return path

    monkeypatch.setenv("PROVISION_IDENTITY", str(key))
    inv = load_inventory(inventory(_json.dumps(sa).encode()))
    assert inv.dns is not None
    provider = make_provider(inv.dns.zones[0], inv)
    creds = provider._credentials()
    assert creds.service_account_email == "dns@lab-project.iam.gserviceaccount.com"
    code, out = _cli("check", "-i", str(tmp_path / "inventory.yml"), identity=tmp_path / "none")
    assert code == 0 and "secret gcp_dns" in out, out
    bad = load_inventory(inventory(b'{"private_key": "PLAINTEXT-OF-THE-SECRET"'))
    assert bad.dns is not None
    with pytest.raises(UsageError) as e:
        make_provider(bad.dns.zones[0], bad)._credentials()
    assert "credentials_secret gcp_dns" in str(e.value) and "PLAINTEXT" not in str(e.value)
