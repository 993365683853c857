"""The host side of `provision certs` (templates/certs/*.sh.j2) run by sh on this machine
in a scratch directory standing for /etc/provision/tls: the key made there (0600) and
kept, the CSR for exactly the name, a certificate for that key installed atomically (the
full chain 0644, the door's combined file 0600), one for another key refused with the
files in place untouched. What the scripts print is parsed by `provision.acme.host`."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path

import pytest

from provision.acme import host

NAME = "api.lab.test"
UNIT = "provision-test-no-such-door.service"


def _sh(script: str) -> str:
    r = subprocess.run(["sh", "-s"], input=script, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _sign(csr_pem: bytes, days: int = 90) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    csr = x509.load_pem_x509_csr(csr_pem)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(csr.subject).issuer_name(ca_name)
            .public_key(csr.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(csr.extensions.get_extension_for_class(
                x509.SubjectAlternativeName).value, critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("the scripts check that the directories are root's")
    return tmp_path / "tls"


def test_key_and_csr_made_once_and_kept(root: Path) -> None:
    first = host.parse_read(_sh(host.read_script([NAME], str(root))), [NAME])[NAME]
    assert not first.refused and first.fullchain_pem is None
    key = root / NAME / "privkey.pem"
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    assert oct((root / NAME).stat().st_mode & 0o777) == "0o700"
    again = host.parse_read(_sh(host.read_script([NAME], str(root))), [NAME])[NAME]
    assert again.csr_pem == first.csr_pem  # same key, same request: nothing remade


def test_install_checks_the_key_and_replaces_atomically(root: Path) -> None:
    on = host.parse_read(_sh(host.read_script([NAME], str(root))), [NAME])[NAME]
    chain = _sign(on.csr_pem)
    got = host.parse_install(_sh(host.install_script(NAME, chain, "127.0.0.1:1", UNIT,
                                                     str(root))))
    assert got.reload == "inactive" and got.fingerprint == host.fingerprint(chain)
    d = root / NAME
    assert (d / "fullchain.pem").read_bytes() == chain
    assert (d / "haproxy.pem").read_bytes() == chain + (d / "privkey.pem").read_bytes()
    assert oct((d / "haproxy.pem").stat().st_mode & 0o777) == "0o600"
    assert oct((d / "fullchain.pem").stat().st_mode & 0o777) == "0o644"
    assert sorted(p.name for p in d.iterdir()) == ["fullchain.pem", "haproxy.pem",
                                                    "privkey.pem", "request.csr"]
    back = host.parse_read(_sh(host.read_script([NAME], str(root))), [NAME])[NAME]
    assert back.fullchain_pem == chain and not back.self_signed


def test_a_certificate_for_another_key_is_refused_and_nothing_changes(
        root: Path, tmp_path: Path) -> None:
    on = host.parse_read(_sh(host.read_script([NAME], str(root))), [NAME])[NAME]
    good = _sign(on.csr_pem)
    host.parse_install(_sh(host.install_script(NAME, good, "127.0.0.1:1", UNIT, str(root))))
    other = host.parse_read(_sh(host.read_script([NAME], str(tmp_path / "other"))), [NAME])
    wrong = _sign(other[NAME].csr_pem)
    got = host.parse_install(_sh(host.install_script(NAME, wrong, "127.0.0.1:1", UNIT,
                                                     str(root))))
    assert "not for the key" in got.refused
    assert (root / NAME / "fullchain.pem").read_bytes() == good
    assert not [p for p in (root / NAME).iterdir() if p.name.startswith(".")]


def test_a_directory_that_is_a_link_is_refused(root: Path, tmp_path: Path) -> None:
    root.mkdir(mode=0o755)
    (tmp_path / "elsewhere").mkdir()
    (root / NAME).symlink_to(tmp_path / "elsewhere")
    got = host.parse_read(_sh(host.read_script([NAME], str(root))), [NAME])[NAME]
    assert "is not a directory" in got.refused
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_the_read_back_waits_for_the_reloaded_door_by_the_clock_not_a_count_of_tries(
        root: Path, tmp_path: Path) -> None:
    # HAProxy's `systemctl reload` returns before its new worker holds the port: the port
    # serves the old certificate for a while. Before, 50 tries 0.2 s apart gave up (a loaded
    # machine took longer); now the read-back lasts host.READBACK_SECONDS by the clock. The
    # clock and the door are stand-ins here: `date` advances a second per look, the port
    # serves the old certificate for the first 55 connections.
    on = host.parse_read(_sh(host.read_script([NAME], str(root))), [NAME])[NAME]
    old, new = _sign(on.csr_pem), _sign(on.csr_pem)
    (tmp_path / "old.pem").write_bytes(old)
    (tmp_path / "new.pem").write_bytes(new)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    stubs = {
        "systemctl": "exit 0\n",
        "sleep": "exit 0\n",
        "date": (f'if [ "$1" = +%s ]; then n=$(cat {tmp_path}/clock 2>/dev/null || echo 1000)\n'
                 f'  echo $((n + 1)) > {tmp_path}/clock; echo "$n"; exit 0; fi\n'
                 'exec /bin/date "$@"\n'),
        "openssl": (f'if [ "$1" = s_client ]; then n=$(cat {tmp_path}/conns 2>/dev/null || echo 0)\n'
                    f'  echo $((n + 1)) > {tmp_path}/conns\n'
                    f'  if [ "$n" -lt 55 ]; then cat {tmp_path}/old.pem; else cat {tmp_path}/new.pem; fi\n'
                    '  exit 0; fi\n'
                    'exec /usr/bin/openssl "$@"\n'),
    }
    for name, body in stubs.items():
        (bin_ / name).write_text("#!/bin/sh\n" + body)
        (bin_ / name).chmod(0o755)
    script = host.install_script(NAME, new, "127.0.0.1:1", UNIT, str(root))
    r = subprocess.run(["sh", "-s"], input=script, capture_output=True, text=True, timeout=120,
                       env={"PATH": f"{bin_}:/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    got = host.parse_install(r.stdout)
    assert got.reload == "ok" and got.fingerprint == host.fingerprint(new)
    assert got.serving, r.stdout  # served == installed: it waited past the 55th connection
    assert int((tmp_path / "conns").read_text()) == 56
