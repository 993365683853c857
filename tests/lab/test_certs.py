"""`provision certs renew` in the lab, on the real door: gpu1's model API as the lab's
inventory declares it (the door, keys, limits), under a name of this module's own, served
by `provision apply`. Pebble (the lab's CA, on ns1) issues through the lab's BIND over
RFC 2136; the key is made on gpu1 and stays there; the certificate is installed, the door
reloaded, and what port 443 serves is read back; from the bastion (which stands for the
internet) the served chain verifies to Pebble's own root (read from its management port,
which listens on ns1's loopback only).

The module leaves gpu1's door as the lab declares it (`gpu1_as_the_lab_declares`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.lab import plan as P

from .conftest import PROVISION, Lab, gpu1_as_the_lab_declares

NAME = f"api.{P.ZONE}"  # not the lab's own name: this module starts with no certificate
TLS = f"/etc/provision/tls/{NAME}"


def _doc(lab: Lab) -> dict[str, Any]:
    """The lab's inventory, gpu1 alone with the lab's model API (no roles), its door's
    name this module's."""
    doc = yaml.safe_load(lab.inventory.read_text())
    gpu1 = doc["hosts"]["gpu1"]
    api = gpu1["services"]["model-api"]
    assert api["https"]["name"] == P.DOOR_NAME  # the lab's own door, renamed below
    api["https"]["name"] = NAME
    doc["hosts"] = {"gpu1": {"address": gpu1["address"], "via": gpu1["via"],
                             "services": {"model-api": api}}}
    doc.pop("roles", None)
    doc.pop("clusters", None)
    doc["dns"]["owner"] = "certs-test"
    return doc


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700)
    return path


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("certs")
    inv = d / "inventory.yml"
    inv.write_text(yaml.safe_dump(_doc(lab), sort_keys=False))
    # this module's name left by an earlier run on a reused lab ($PROVISION_TEST_LAB)
    lab.host("gpu1", "rm", "-rf", TLS)
    state = _private_dir(d / "state")
    code, data, err = _apply(lab, inv, state)
    yield {"dir": d, "inventory": inv, "state": state, "apply": (code, data, err)}
    gpu1_as_the_lab_declares(lab, d)
    lab.host("gpu1", "rm", "-rf", TLS)  # no door names it any more


def _apply(lab: Lab, inv: Path, state: Path) -> tuple[int, dict[str, Any], str]:
    return lab.provision_json("apply", "--yes", "-i", str(inv), "gpu1",
                              env={"PROVISION_STATE_DIR": str(state)}, timeout=300)


def _renew(lab: Lab, world: dict[str, Any], *extra: str, state: Path | None = None,
           as_json: bool = True) -> tuple[int, dict[str, Any], str]:
    env = {"PROVISION_STATE_DIR": str(state or world["state"])}
    args = ("certs", "renew", "gpu1", "-i", str(world["inventory"]), *extra)
    if as_json:
        return lab.provision_json(*args, env=env, timeout=240)
    r = lab.op("env", *(f"{k}={v}" for k, v in env.items()), *PROVISION, *args,
               check=False, timeout=240)
    return r.returncode, {}, r.stdout + r.stderr


def _only(data: dict[str, Any]) -> dict[str, Any]:
    certs = data["certificates"]
    assert len(certs) == 1, certs
    return dict(certs[0])


def _served_from_bastion(lab: Lab) -> list[bytes]:
    # bounded: a port that accepts and never answers must fail the test, not hang it
    out = lab.host("bastion", "sh", "-c", f"timeout 20 openssl s_client -connect "
                   f"{lab.addr('gpu1', 'prv')}:443 -servername {NAME} -showcerts "
                   "</dev/null 2>/dev/null").stdout
    blocks = out.split("-----BEGIN CERTIFICATE-----")[1:]
    return [("-----BEGIN CERTIFICATE-----" + b.split("-----END CERTIFICATE-----")[0]
             + "-----END CERTIFICATE-----\n").encode() for b in blocks]


def _fingerprint(pem: bytes) -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    return x509.load_pem_x509_certificate(pem).fingerprint(hashes.SHA256()).hex().upper()


def _installed(lab: Lab) -> str:
    return _fingerprint(lab.host("gpu1", "cat", f"{TLS}/fullchain.pem").stdout.encode())


def _pebble_root(lab: Lab) -> bytes:
    return lab.host("ns1", "curl", "-sk", "https://127.0.0.1:15000/roots/0").stdout.encode()


def _verify(chain: list[bytes], root_pem: bytes) -> None:
    from cryptography import x509

    assert chain, "port 443 served no certificate"
    certs = [x509.load_pem_x509_certificate(c) for c in chain]
    root = x509.load_pem_x509_certificate(root_pem)
    for child, parent in zip(certs, [*certs[1:], root], strict=False):
        child.verify_directly_issued_by(parent)
    sans = certs[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [NAME]


def _challenges(lab: Lab) -> list[str]:
    r = lab.op("dig", "+noall", "+answer", "+norecurse", "@" + lab.addr("ns1"), "AXFR",
               P.ZONE, "-k", str(lab.tsig_key_file))
    return [ln for ln in r.stdout.splitlines() if "_acme-challenge" in ln]


def test_apply_serves_the_door_with_a_certificate_from_the_ca(lab: Lab, world: dict[str, Any]) -> None:
    code, data, err = world["apply"]
    assert code == 0, (err, json.dumps(data)[:3000])
    # the door came up with its placeholder, then apply ordered the certificate
    assert f"certs: gpu1 {NAME}: renewed: no certificate yet" in err, err
    key = lab.host("gpu1", "stat", "-c", "%a %U", f"{TLS}/privkey.pem")
    assert key.stdout.split() == ["600", "root"]
    chain = _served_from_bastion(lab)
    _verify(chain, _pebble_root(lab))
    assert _fingerprint(chain[0]) == _installed(lab)
    assert _challenges(lab) == []
    # what apply installed is remembered: the next apply changes nothing and orders nothing
    code, data, err = _apply(lab, world["inventory"], world["state"])
    assert code == 0, err
    (host,) = [h for h in data["hosts"] if h["host"] == "gpu1"]
    assert host["actions"] == [] and "certs:" not in err, (host["actions"], err)


def test_renew_when_due_and_forced(lab: Lab, world: dict[str, Any]) -> None:
    before = _installed(lab)
    # not due: nothing ordered, exit 0
    code, data, err = _renew(lab, world)
    assert code == 0, err
    current = _only(data)
    assert current["status"] == "current" and "due from" in current["reason"], current
    assert current["fingerprint"] == before

    # forced early: a new certificate, and the port serves it after the reload
    code, data, err = _renew(lab, world, "--force")
    again = _only(data)
    assert code == 0, err
    assert again["status"] == "renewed" and again["fingerprint"] != before, again
    assert again["served"] == again["fingerprint"]
    chain = _served_from_bastion(lab)
    assert _fingerprint(chain[0]) == again["fingerprint"] == _installed(lab)
    _verify(chain, _pebble_root(lab))
    # the private key never left gpu1: the operator's state holds the ACME account and the
    # record of what was installed (a fingerprint and dates), no key of the door's
    state: Path = world["state"]
    assert sorted(p.name for p in state.rglob("*") if p.is_file()) == [
        "account.key", "account.url", f"{NAME}.json"]
    assert "PRIVATE" not in next(state.rglob(f"{NAME}.json")).read_text()
    # the door's own step sees nothing to do after a renewal
    code, data, err = _apply(lab, world["inventory"], state)
    assert code == 0, err
    (host,) = [h for h in data["hosts"] if h["host"] == "gpu1"]
    assert host["actions"] == [], host["actions"]
    assert _fingerprint(_served_from_bastion(lab)[0]) == again["fingerprint"]


def test_a_challenge_left_behind_is_cleaned_by_the_next_run(
        lab: Lab, world: dict[str, Any]) -> None:
    from provision.acme.dns01 import Dns01
    from provision.inventory import load_inventory

    with lab.operator_netns():
        Dns01(load_inventory(world["inventory"])).write(NAME, ["left-by-a-killed-run"])
    assert len(_challenges(lab)) == 2  # the TXT and its ownership marker
    code, _, out = _renew(lab, world, "--force", as_json=False)
    assert code == 0, out
    assert f"removed a challenge record left behind for {NAME}" in out
    assert _challenges(lab) == []


def test_the_ca_down_leaves_the_old_certificate_serving(lab: Lab, world: dict[str, Any]) -> None:
    before = _fingerprint(_served_from_bastion(lab)[0])
    lab.host("ns1", "systemctl", "stop", P.PEBBLE_UNIT)
    try:
        code, data, err = _renew(lab, world, "--force")
    finally:
        lab.host("ns1", "systemctl", "start", P.PEBBLE_UNIT)
    failed = _only(data)
    assert code == 1, err
    assert failed["status"] == "failed" and "could not be reached" in failed["reason"]
    assert _fingerprint(_served_from_bastion(lab)[0]) == before == _installed(lab)
    assert _challenges(lab) == []


def test_caa_forbidding_the_ca_is_refused_before_any_order(
        lab: Lab, world: dict[str, Any], tmp_path: Path) -> None:
    import dns.query
    import dns.update

    before = _fingerprint(_served_from_bastion(lab)[0])
    fresh = _private_dir(tmp_path / "state")  # no account yet: none may be made
    up = dns.update.UpdateMessage(P.ZONE, keyring=lab.tsig_keyring())
    up.replace("@", 300, "CAA", '0 issue "letsencrypt.org"')
    with lab.operator_netns():
        dns.query.tcp(up, lab.addr("ns1"), timeout=5)
    try:
        code, data, err = _renew(lab, world, "--force", state=fresh)
    finally:
        gone = dns.update.UpdateMessage(P.ZONE, keyring=lab.tsig_keyring())
        gone.delete("@", "CAA")
        with lab.operator_netns():
            dns.query.tcp(gone, lab.addr("ns1"), timeout=5)
    failed = _only(data)
    assert code == 1, err
    assert "allow letsencrypt.org to issue" in failed["reason"], failed
    assert not list(fresh.rglob("account.url"))  # no account made: nothing sent to the CA
    assert _fingerprint(_served_from_bastion(lab)[0]) == before
