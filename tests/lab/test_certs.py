"""`provision certs renew` in the lab: Pebble (the lab's CA, on ns1) issues through the
lab's BIND over RFC 2136; the key is made on gpu1 and stays there; the certificate is
installed, the door reloaded, and what port 443 serves is read back; from the bastion
(which stands for the internet) the served chain verifies to Pebble's own root (read
from its management port, which listens on ns1's loopback only).

The door here is a stand-in (HAProxy with the certificate's combined file, as a unit
named like the door's, with a reload): the door itself is the `door` work's."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.lab import plan as P

from .conftest import PROVISION, Lab

NAME = f"api.{P.ZONE}"
STAND_IN = """\
global
    log stdout format raw local0 err
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend door
    bind :443 ssl crt /etc/provision/tls/{name}/haproxy.pem
    http-request return status 200 content-type text/plain string ok
"""
UNIT = """\
[Service]
Type=notify
ExecStart=/usr/sbin/haproxy -Ws -f /run/stand-in-door.cfg
ExecReload=/bin/kill -USR2 $MAINPID
"""


def _inventory(lab: Lab, tmp_path: Path) -> Path:
    doc = yaml.safe_load(lab.inventory.read_text())
    b4 = lab.addr("bastion", "prv")
    doc["hosts"] = {"gpu1": {**doc["hosts"]["gpu1"], "roles": [], "services": {"model-api": {
        "port": 8000, "bind": "127.0.0.1", "expose": {"from": [f"{b4}/32"]},
        "command": "/usr/bin/python3 -m http.server --bind {bind} {port}",
        "https": {"name": NAME}}}}}
    doc.pop("roles", None)
    doc.pop("clusters", None)
    doc["dns"]["owner"] = "certs-test"
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _renew(lab: Lab, inv: Path, state: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    r = subprocess.run(["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, "certs",
                        "renew", "gpu1", "-i", str(inv), "--json", *extra],
                       capture_output=True, text=True, timeout=240,
                       env={**__import__("os").environ, "PROVISION_STATE_DIR": str(state)})
    try:
        data = json.loads(r.stdout)
    except json.JSONDecodeError:
        data = {}
    return r.returncode, data, r.stderr


def _only(data: dict[str, Any]) -> dict[str, Any]:
    certs = data["certificates"]
    assert len(certs) == 1, certs
    return dict(certs[0])


def _served_from_bastion(lab: Lab) -> list[bytes]:
    out = lab.host("bastion", "sh", "-c", f"openssl s_client -connect {lab.addr('gpu1')}:443 "
                   f"-servername {NAME} -showcerts </dev/null 2>/dev/null").stdout
    blocks = out.split("-----BEGIN CERTIFICATE-----")[1:]
    return [("-----BEGIN CERTIFICATE-----" + b.split("-----END CERTIFICATE-----")[0]
             + "-----END CERTIFICATE-----\n").encode() for b in blocks]


def _fingerprint(pem: bytes) -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    return x509.load_pem_x509_certificate(pem).fingerprint(hashes.SHA256()).hex().upper()


def _challenges(lab: Lab) -> list[str]:
    r = lab.op("dig", "+noall", "+answer", "+norecurse", "@" + lab.addr("ns1"), "AXFR",
               P.ZONE, "-k", str(lab.tsig_key_file))
    return [ln for ln in r.stdout.splitlines() if "_acme-challenge" in ln]


@pytest.fixture(scope="module")
def door(lab: Lab) -> Iterator[None]:
    """The stand-in door on gpu1, started by the test once a certificate is there."""
    # the real door's unit (in /etc, which wins over /run) may be left by another test
    lab.host("gpu1", "sh", "-c", f"systemctl stop provision-door.service 2>/dev/null; "
             f"rm -rf /etc/provision/tls/{NAME} /etc/systemd/system/provision-door.service")
    lab.host("gpu1", "sh", "-c", f"cat > /run/stand-in-door.cfg <<'EOF'\n"
             f"{STAND_IN.format(name=NAME)}EOF\n"
             f"cat > /run/systemd/system/provision-door.service <<'EOF'\n{UNIT}EOF\n"
             "systemctl daemon-reload")
    yield
    lab.host("gpu1", "systemctl", "stop", "provision-door.service", check=False)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    s = tmp_path / "state"
    s.mkdir(mode=0o700)
    return s


def test_issue_install_serve_renew(lab: Lab, tmp_path: Path, state: Path, door: None) -> None:
    inv = _inventory(lab, tmp_path)
    code, data, err = _renew(lab, inv, state)
    first = _only(data)
    assert code == 0, err
    assert first["status"] == "renewed" and "no certificate yet" in first["reason"], first
    assert "the door is not running" in first["reason"]
    key = lab.host("gpu1", "stat", "-c", "%a %U", f"/etc/provision/tls/{NAME}/privkey.pem")
    assert key.stdout.split() == ["600", "root"]
    assert _challenges(lab) == []
    lab.host("gpu1", "systemctl", "start", "provision-door.service")

    # not due: nothing ordered, exit 0
    code, data, err = _renew(lab, inv, state)
    assert code == 0, err
    assert _only(data)["status"] == "current" and "due from" in _only(data)["reason"]

    # forced early: a new certificate, and the port serves it after the reload
    code, data, err = _renew(lab, inv, state, "--force")
    again = _only(data)
    assert code == 0, err
    assert again["status"] == "renewed" and again["fingerprint"] != first["fingerprint"]
    assert again["served"] == again["fingerprint"]
    chain = _served_from_bastion(lab)
    assert _fingerprint(chain[0]) == again["fingerprint"]
    root = lab.host("ns1", "curl", "-sk", "https://127.0.0.1:15000/roots/0").stdout.encode()
    _verify(chain, root)
    # the private key never left gpu1: the operator's state holds the ACME account and the
    # record of what was installed (a fingerprint and dates), no key of the door's
    assert sorted(p.name for p in state.rglob("*") if p.is_file()) == [
        "account.key", "account.url", f"{NAME}.json"]
    assert "PRIVATE" not in next(state.rglob(f"{NAME}.json")).read_text()


def _verify(chain: list[bytes], root_pem: bytes) -> None:
    from cryptography import x509

    certs = [x509.load_pem_x509_certificate(c) for c in chain]
    root = x509.load_pem_x509_certificate(root_pem)
    for child, parent in zip(certs, [*certs[1:], root], strict=False):
        child.verify_directly_issued_by(parent)
    sans = certs[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [NAME]


def test_a_challenge_left_behind_is_cleaned_by_the_next_run(
        lab: Lab, tmp_path: Path, state: Path, door: None) -> None:
    from provision.acme.dns01 import Dns01
    from provision.inventory import load_inventory

    inv = _inventory(lab, tmp_path)
    with lab.operator_netns():
        Dns01(load_inventory(inv)).write(NAME, ["left-by-a-killed-run"])
    assert len(_challenges(lab)) == 2  # the TXT and its ownership marker
    r = subprocess.run(["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, "certs",
                        "renew", "gpu1", "-i", str(inv), "--force"], capture_output=True,
                       text=True, timeout=240,
                       env={**__import__("os").environ, "PROVISION_STATE_DIR": str(state)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"removed a challenge record left behind for {NAME}" in r.stderr
    assert _challenges(lab) == []


def test_the_ca_down_leaves_the_old_certificate_serving(
        lab: Lab, tmp_path: Path, state: Path, door: None) -> None:
    inv = _inventory(lab, tmp_path)
    before = _fingerprint(_served_from_bastion(lab)[0])
    lab.host("ns1", "systemctl", "stop", P.PEBBLE_UNIT)
    try:
        code, data, err = _renew(lab, inv, state, "--force")
    finally:
        lab.host("ns1", "systemctl", "start", P.PEBBLE_UNIT)
    failed = _only(data)
    assert code == 1, err
    assert failed["status"] == "failed" and "could not be reached" in failed["reason"]
    assert _fingerprint(_served_from_bastion(lab)[0]) == before
    assert _challenges(lab) == []


def test_caa_forbidding_the_ca_is_refused_before_any_order(
        lab: Lab, tmp_path: Path, state: Path, door: None) -> None:
    import dns.query
    import dns.update

    before = _fingerprint(_served_from_bastion(lab)[0])
    up = dns.update.UpdateMessage(P.ZONE, keyring=lab.tsig_keyring())
    up.replace("@", 300, "CAA", '0 issue "letsencrypt.org"')
    with lab.operator_netns():
        dns.query.tcp(up, lab.addr("ns1"), timeout=5)
    try:
        code, data, err = _renew(lab, _inventory(lab, tmp_path), state, "--force")
    finally:
        gone = dns.update.UpdateMessage(P.ZONE, keyring=lab.tsig_keyring())
        gone.delete("@", "CAA")
        with lab.operator_netns():
            dns.query.tcp(gone, lab.addr("ns1"), timeout=5)
    failed = _only(data)
    assert code == 1, err
    assert "allow letsencrypt.org to issue" in failed["reason"], failed
    assert not list(state.rglob("account.url"))  # no account made: nothing sent to the CA
    assert _fingerprint(_served_from_bastion(lab)[0]) == before
