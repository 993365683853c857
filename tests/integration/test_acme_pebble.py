"""provision.acme against the real Pebble (Let's Encrypt's test CA, Debian's package) on
127.0.0.1, the challenge written through the real PowerDNS server (also on 127.0.0.1)
that Pebble's DNS-01 validation asks: issue, the chain to Pebble's root, a challenge left
behind removed by the next run, CAA refusing the CA before any order, the CA down in the
middle of an order, external account binding. Loopback only."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.acme import issue as acme_issue
from provision.acme.dns01 import Dns01
from provision.errors import OperationError
from provision.inventory import Inventory, load_inventory
from tests.support.pebble_server import Pebble, pebble_server
from tests.support.powerdns_server import KEY_ENV, URL_ENV, Pdns

EAB = {"kid-1": "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W"}



@pytest.fixture(scope="module")
def pebble(tmp_path_factory: pytest.TempPathFactory, pdns: Pdns) -> Iterator[Pebble]:
    with pebble_server(tmp_path_factory.mktemp("pebble"), f"127.0.0.1:{pdns.dns_port}") as p:
        yield p


_zones = iter(range(1_000_000))


@pytest.fixture
def zone(pdns: Pdns, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    monkeypatch.setenv(KEY_ENV, pdns.key)
    monkeypatch.setenv(URL_ENV, pdns.url)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    monkeypatch.setenv("PROVISION_STATE_DIR", str(state))
    z = f"c{next(_zones)}.example.org."
    pdns.create_zone(z)
    yield z
    pdns.delete_zone(z)


def _inv(tmp_path: Path, pdns: Pdns, pebble: Pebble, zone: str, **acme: Any) -> Inventory:
    shutil.copy(pebble.bundle, tmp_path / "pebble-listener.pem")
    doc = {"version": 1,
           "acme": {"ca": pebble.directory, "ca_bundle": "pebble-listener.pem", **acme},
           "dns": {"owner": "certs", "zones": {zone.rstrip("."): {
               "provider": "powerdns", "api_url": pdns.url, "dns_address": "127.0.0.1",
               "dns_port": pdns.dns_port}}}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    return load_inventory(p)


def _csr(name: str) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    csr = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
           .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
           .sign(key, hashes.SHA256()))
    return csr.public_bytes(serialization.Encoding.PEM)


def _challenges(pdns: Pdns, zone: str) -> list[tuple[str, str]]:
    return [k for k in pdns.rrsets(zone) if "_acme-challenge" in k[0]]


def _chains_to(fullchain: bytes, root_pem: bytes, name: str) -> None:
    from cryptography import x509

    certs = x509.load_pem_x509_certificates(fullchain)
    root = x509.load_pem_x509_certificate(root_pem)
    leaf = certs[0]
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [name]
    for child, parent in zip(certs, [*certs[1:], root], strict=False):
        child.verify_directly_issued_by(parent)  # raises when not


def test_issue_through_powerdns_chains_to_pebbles_root_and_cleans_up(
        tmp_path: Path, pdns: Pdns, pebble: Pebble, zone: str) -> None:
    inv = _inv(tmp_path, pdns, pebble, zone)
    name = f"api.{zone.rstrip('.')}"
    said: list[str] = []
    ca = acme_issue.Ca(inv)
    issued = acme_issue.issue(inv, _csr(name), [name], ca=ca, log=said.append)
    _chains_to(issued.fullchain_pem, pebble.roots(), name)
    # the CA's renewal information, when it offers it, is a time (it once raised KeyError)
    when = ca.renewal_time(issued.fullchain_pem)
    assert when is None or when.tzinfo is not None
    assert any("every authoritative server answers" in s for s in said), said
    assert _challenges(pdns, zone) == []
    key = Path(tmp_path / "state").rglob("account.key")
    assert [oct(p.stat().st_mode & 0o777) for p in key] == ["0o600"]


def test_an_account_the_ca_forgot_is_registered_again(
        tmp_path: Path, pdns: Pdns, pebble: Pebble, zone: str) -> None:
    """This machine remembers an account the CA does not know (a test CA restarted, as
    `make demo` met it with the lab's Pebble): before, every order failed with
    accountDoesNotExist until the state file was removed by hand; now it registers again
    and the order goes through."""
    from provision.acme import account

    inv = _inv(tmp_path, pdns, pebble, zone)
    assert inv.acme is not None
    url = inv.acme.directory
    account.load_key(url)
    gone = url.rsplit("/", 1)[0] + "/my-account/0123456789abcdef"
    account.save_url(url, gone)
    name = f"again.{zone.rstrip('.')}"
    said: list[str] = []
    issued = acme_issue.issue(inv, _csr(name), [name], log=said.append)
    _chains_to(issued.fullchain_pem, pebble.roots(), name)
    assert any("does not know the account" in s and "registering again" in s for s in said), said
    assert account.load_url(url) not in (None, gone)


def test_a_challenge_left_by_a_killed_run_is_removed_by_the_next(
        tmp_path: Path, pdns: Pdns, pebble: Pebble, zone: str) -> None:
    inv = _inv(tmp_path, pdns, pebble, zone)
    name = f"left.{zone.rstrip('.')}"
    Dns01(inv).write(name, ["stale-token-of-a-killed-run"])  # as a killed run leaves it
    assert len(_challenges(pdns, zone)) == 2  # the TXT and its marker
    said: list[str] = []
    issued = acme_issue.issue(inv, _csr(name), [name], log=said.append)
    assert f"removed a challenge record left behind for {name}" in said
    _chains_to(issued.fullchain_pem, pebble.roots(), name)
    assert _challenges(pdns, zone) == []


def test_someone_elses_challenge_is_not_touched(
        tmp_path: Path, pdns: Pdns, pebble: Pebble, zone: str) -> None:
    inv = _inv(tmp_path, pdns, pebble, zone)
    name = f"other.{zone.rstrip('.')}"
    pdns.set_rrset(zone, f"_acme-challenge.{name}.", "TXT", 60, ['"certbot-was-here"'])
    with pytest.raises(OperationError, match="no ownership marker of this inventory"):
        acme_issue.issue(inv, _csr(name), [name])
    assert pdns.rrsets(zone)[(f"_acme-challenge.{name}.", "TXT")][1] == ['"certbot-was-here"']


def test_caa_forbidding_the_ca_is_refused_before_any_order(
        tmp_path: Path, pdns: Pdns, pebble: Pebble, zone: str) -> None:
    inv = _inv(tmp_path, pdns, pebble, zone, caa_identities=["pebble.test"])
    pdns.set_rrset(zone, zone, "CAA", 300, ['0 issue "letsencrypt.org"'])
    ca = acme_issue.Ca(inv)
    orders: list[bytes] = []

    def spy(csr: bytes, profile: str | None = None) -> Any:
        orders.append(csr)
        raise AssertionError("an order was placed")

    ca.client.new_order = spy  # type: ignore[method-assign,assignment]
    name = f"caa.{zone.rstrip('.')}"
    with pytest.raises(acme_issue.CaaRefused, match=r"allow letsencrypt\.org to issue"):
        acme_issue.issue(inv, _csr(name), [name], ca=ca)
    assert orders == [] and _challenges(pdns, zone) == []
    pdns.set_rrset(zone, zone, "CAA", 300, ['0 issue "pebble.test"'])
    acme_issue.issue(inv, _csr(name), [name])  # allowed by name: issued


def test_the_ca_down_mid_order_is_a_clear_error_and_the_challenge_is_removed(
        tmp_path: Path, pdns: Pdns, zone: str) -> None:
    with pebble_server(tmp_path / "p", f"127.0.0.1:{pdns.dns_port}") as down:
        inv = _inv(tmp_path, pdns, down, zone)
        dns = Dns01(inv)
        served = dns.wait_served

        def then_the_ca_goes(records: Any) -> None:
            served(records)
            down.stop()

        dns.wait_served = then_the_ca_goes  # type: ignore[method-assign]
        name = f"down.{zone.rstrip('.')}"
        with pytest.raises(acme_issue.CaError, match="could not be reached"):
            acme_issue.issue(inv, _csr(name), [name], dns=dns)
    assert _challenges(pdns, zone) == []


def test_external_account_binding(tmp_path: Path, pdns: Pdns, zone: str) -> None:
    (tmp_path / "eab.key").write_text(EAB["kid-1"] + "\n")
    with pebble_server(tmp_path / "p", f"127.0.0.1:{pdns.dns_port}", eab=EAB) as strict:
        name = f"eab.{zone.rstrip('.')}"
        without = _inv(tmp_path, pdns, strict, zone)
        with pytest.raises(acme_issue.CaError, match="requires external account binding"):
            acme_issue.issue(without, _csr(name), [name])
        bound = _inv(tmp_path, pdns, strict, zone,
                     eab={"kid": "kid-1", "hmac_key_file": "eab.key"})
        issued = acme_issue.issue(bound, _csr(name), [name])
        _chains_to(issued.fullchain_pem, strict.roots(), name)
