"""What a host says to `provision certs` is checked before it drives anything."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from provision.acme import host


def _csr(*names: str) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    b = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([]))
    if names:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]),
                            critical=False)
    return b.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def _line(name: str, csr: bytes) -> str:
    return f"cert\t{name}\t{base64.b64encode(csr).decode()}\t-\t0\n"


def test_a_csr_for_exactly_the_name_is_taken() -> None:
    got = host.parse_read(_line("api.x.org", _csr("api.x.org")), ["api.x.org"])
    assert got["api.x.org"].csr_pem and not got["api.x.org"].refused


@pytest.mark.parametrize(("names", "why"), [
    (("api.x.org", "evil.example.com"), "not api.x.org alone"),
    (("evil.example.com",), "names evil.example.com"),
    ((), "names no DNS name")])
def test_a_csr_for_other_names_is_refused(names: tuple[str, ...], why: str) -> None:
    got = host.parse_read(_line("api.x.org", _csr(*names)), ["api.x.org"])["api.x.org"]
    assert why in got.refused and not got.csr_pem


def test_garbage_and_silence_are_errors() -> None:
    with pytest.raises(host.HostAnswerError, match="unexpected line"):
        host.parse_read("hello\x1b[2J\n", ["api.x.org"])
    with pytest.raises(host.HostAnswerError, match=r"said nothing of api\.x\.org"):
        host.parse_read("", ["api.x.org"])
    with pytest.raises(host.HostAnswerError, match="not base64"):
        host.parse_read("cert\tapi.x.org\t!!!\t-\t0\n", ["api.x.org"])


def test_refusal_of_the_whole_tree_applies_to_every_name() -> None:
    got = host.parse_read("refused\t-\t/etc/provision/tls is not root's\n", ["a.x.org", "b.x.org"])
    assert all("not root's" in v.refused for v in got.values())


def test_install_answer() -> None:
    fp = "AB" * 32
    ok = host.parse_install(f"installed\t{fp}\nreload\tok\nserved\t{fp}\n")
    assert ok.serving
    stale = host.parse_install(f"installed\t{fp}\nreload\tok\nserved\t{'CD' * 32}\n")
    assert not stale.serving
    with pytest.raises(host.HostAnswerError):
        host.parse_install("installed\tnot-hex\n")


def test_connect_address() -> None:
    assert host.connect_address("10.0.0.5", 443) == "10.0.0.5:443"
    assert host.connect_address("fd00::5", 443) == "[fd00::5]:443"
    assert host.connect_address("gpu1.example.org", 8443) == "127.0.0.1:8443"


def test_apply_asks_a_host_only_when_its_certificate_may_be_due(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime as dt

    from provision.acme import record
    from provision.acme.renew import maybe_due
    from provision.acme.renewal import Held
    from provision.inventory.model import Expose, Host, Https, Limits, Rate, Service

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    monkeypatch.setenv("PROVISION_STATE_DIR", str(state))
    https = Https("api.x.org", "x.org", 443, (), Limits(Rate(1, 1), Rate(1, 1), None, 8))
    svc = Service("api", 8000, "127.0.0.1", Expose("public", ("0.0.0.0/0",)), "x", "svc-api",
                  https=https)
    gpu = Host("gpu1", "10.0.0.1", "admin", 22, None, (), services=(svc,))
    now = dt.datetime(2026, 1, 10, tzinfo=dt.UTC)
    assert maybe_due([gpu], now) == [gpu]  # never seen: ask the host
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    record.save("gpu1", "api.x.org", "AB" * 32, Held(t0, t0 + dt.timedelta(days=90),
                                                     ("api.x.org",)))
    assert maybe_due([gpu], now) == []  # seen current: no remote command
    assert maybe_due([gpu], t0 + dt.timedelta(days=61)) == [gpu]  # due by then
    # what the run's facts say the host holds: the recorded one, another, a placeholder
    assert maybe_due([gpu], now, {"gpu1": {"api.x.org": "ab" * 32}}) == []
    assert maybe_due([gpu], now, {"gpu1": {"api.x.org": "cd" * 32}}) == [gpu]  # a new host
    assert maybe_due([gpu], now, {"gpu1": {"api.x.org": None}}) == [gpu]  # placeholder: before,
    # a record left by an earlier host of that name kept the new one on its placeholder
    f = state / "acme" / "installed" / "gpu1" / "api.x.org.json"
    assert oct(f.stat().st_mode & 0o777) == "0o600"
