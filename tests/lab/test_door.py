"""The door against the lab's real gpu1 (docs/door.md): HAProxy from Debian in front of a
service on 127.0.0.1, applied by `provision apply`, reached from the bastion (which stands
for the internet here: the operator's namespace has no route to the private segment).

Each test reads what the port really serves: the status, the protocol, the headers, the
certificate and the config digest the door sends back to the host itself.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import Lab, gpu1_as_the_lab_declares

pytestmark = pytest.mark.lab

NAME = "model.lab.test"
KEYS = {"alice": "alice-door-key-0123456789", "bob": "bob-door-key-0123456789",
        "loop": "loop-door-key-0123456789"}
TLS = f"/etc/provision/tls/{NAME}"
# the world, as the README and inventories/example.yml write it (iptables-save prints no -s
# for it: the read-back models that, tests/integration/test_iptables_readback.py)
WORLD = ["0.0.0.0/0", "::/0"]


def digest(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def inventory(lab: Lab, keys: tuple[str, ...] = ("alice", "bob", "loop"),
              port: int = 443) -> dict[str, Any]:
    doc = yaml.safe_load(lab.inventory.read_text())
    doc.pop("roles", None)
    doc.pop("clusters", None)
    doc["dns"]["owner"] = "door-test"  # the lab's zone (RFC 2136) and CA (Pebble): a real certificate
    doc["hosts"] = {"gpu1": {"address": doc["hosts"]["gpu1"]["address"], "via": "bastion",
                             "packages": ["openssh-server"],
                             "services": {"model-api": {
                                 "port": 8000, "expose": {"from": WORLD},
                                 "command": "/usr/bin/python3 -m http.server --bind {bind} {port}",
                                 "https": {"name": NAME, "port": port,
                                           "keys": {k: digest(KEYS[k]) for k in keys},
                                           # per key: 6 at once, then 2 a second (a window of 3 s)
                                           "limits": {"per_key": "2/s", "per_address": "100/s",
                                                      "burst": 6, "connections": 20}}}}}}
    return doc


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("door")
    (d / "state").mkdir(mode=0o700)  # the ACME account and what was installed: this module's
    w = {"dir": d, "lab": lab}
    code, data, err = apply(w, inventory(lab))
    assert code == 0, (err, json.dumps(data)[:3000])
    yield w
    gpu1_as_the_lab_declares(lab, d)


def apply(world: dict[str, Any], doc: dict[str, Any], name: str = "inventory.yml") -> tuple[int, dict[str, Any], str]:
    path: Path = world["dir"] / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    lab: Lab = world["lab"]
    return lab.provision_json("apply", "--yes", "-i", str(path), "gpu1", timeout=300,
                              env={"PROVISION_STATE_DIR": str(world["dir"] / "state")})


def curl(lab: Lab, *args: str, key: str | None = None, where: str = "bastion",
         address: str | None = None) -> subprocess.CompletedProcess[str]:
    addr = address or lab.addr("gpu1", "prv")
    auth = ("-H", f"Authorization: Bearer {key}") if key else ()
    return lab.host(where, "curl", "-sk", "--http2", "-m", "10", "--resolve", f"{NAME}:443:{addr}",
                    *auth, *args, check=False)


def status(lab: Lab, key: str | None = None, **kw: Any) -> tuple[str, str]:
    r = curl(lab, "-o", "/dev/null", "-w", "%{http_code} %{http_version}", f"https://{NAME}/",
             key=key, **kw)
    code, version = [*r.stdout.split(), "", ""][:2]
    return code, version


def served_digest(lab: Lab) -> str:
    r = lab.host("gpu1", "curl", "-sk", "-m", "5", "-o", "/dev/null", "-D", "-", "https://127.0.0.1:443/")
    return next(ln.split(":", 1)[1].strip() for ln in r.stdout.splitlines()
                if ln.lower().startswith("x-provision-door:"))


def test_key_gives_200_over_http2_and_no_key_401(world: dict[str, Any]) -> None:
    lab: Lab = world["lab"]
    assert status(lab, KEYS["alice"]) == ("200", "2")
    r = curl(lab, "-D", "-", f"https://{NAME}/")
    head, _, body = r.stdout.partition("\n\n")
    assert head.startswith("HTTP/2 401"), r.stdout
    assert 'www-authenticate: Bearer realm="model.lab.test"' in head.lower().replace("bearer", "Bearer")
    assert json.loads(body)["error"]["code"] == "unauthorized"
    assert "strict-transport-security: max-age=63072000" in head.lower()
    assert status(lab, "not-a-key-of-anyone") == ("401", "2")
    # the certificate served is the one on the host; its private key is root's alone
    fp = lab.host("gpu1", "openssl", "x509", "-in", f"{TLS}/fullchain.pem", "-noout",
                  "-fingerprint", "-sha256").stdout.strip()
    served = lab.host("bastion", "sh", "-c", f"openssl s_client -connect {lab.addr('gpu1', 'prv')}:443 "
                      f"-servername {NAME} </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256"
                      ).stdout.strip()
    assert fp and served == fp
    modes = lab.host("gpu1", "stat", "-c", "%a %U %n", f"{TLS}/privkey.pem", f"{TLS}/haproxy.pem", TLS).stdout
    assert modes.split("\n")[:3] == [f"600 root {TLS}/privkey.pem", f"600 root {TLS}/haproxy.pem", f"700 root {TLS}"]
    # the service itself listens on loopback only; the world reaches the door
    ss = lab.host("gpu1", "ss", "-Hltn", "sport = :8000").stdout
    assert "127.0.0.1:8000" in ss and "0.0.0.0:8000" not in ss
    assert lab.host("bastion", "curl", "-s", "-m", "3", f"http://{lab.addr('gpu1', 'prv')}:8000/",
                    check=False).returncode != 0
    # only digests on the host
    maps = lab.host("gpu1", "sh", "-c", "cat /etc/provision/door/*.keys").stdout
    assert hashlib.sha256(KEYS["alice"].encode()).hexdigest() in maps and KEYS["alice"] not in maps


def test_no_op_apply_changes_nothing(world: dict[str, Any]) -> None:
    lab: Lab = world["lab"]
    before = served_digest(lab)
    code, data, err = apply(world, inventory(lab))
    assert code == 0, err
    (host,) = [h for h in data["hosts"] if h["host"] == "gpu1"]
    assert host["actions"] == [], host["actions"]
    assert served_digest(lab) == before


def test_rate_limit_429_with_headers_then_200_after_retry_after(world: dict[str, Any]) -> None:
    lab: Lab = world["lab"]
    urls = [a for _ in range(14) for a in ("-o", "/dev/null", f"https://{NAME}/")]
    # one connection, one curl: 14 requests in far less than the 3 s window
    r = curl(lab, "-w", "%{http_code}\n", *urls, key=KEYS["loop"])
    codes = r.stdout.split()
    assert codes[:6] == ["200"] * 6, codes
    assert "429" in codes[6:], codes
    r = curl(lab, "-D", "-", f"https://{NAME}/", key=KEYS["loop"])
    head, _, body = r.stdout.partition("\n\n")
    headers = dict(ln.lower().split(": ", 1) for ln in head.splitlines()[1:] if ": " in ln)
    assert head.startswith("HTTP/2 429"), r.stdout
    assert json.loads(body)["error"]["code"] == "rate_limited"
    assert headers["ratelimit-limit"] == headers["x-ratelimit-limit"] == "6"
    assert headers["ratelimit-remaining"] == headers["x-ratelimit-remaining"] == "0"
    retry = int(headers["retry-after"])
    assert retry == int(headers["ratelimit-reset"]) == 3
    # another key is not limited by this one's counter
    assert status(lab, KEYS["alice"])[0] == "200"
    time.sleep(retry)
    assert status(lab, KEYS["loop"])[0] == "200"


def test_slow_connections_from_one_address_do_not_stop_another(world: dict[str, Any]) -> None:
    lab: Lab = world["lab"]
    script = f"""
import socket, sys
held, failed = [], 0
for _ in range(200):
    try:
        held.append(socket.create_connection(({lab.addr('gpu1', 'prv')!r}, 443), timeout=5))
    except OSError:
        failed += 1  # refused or reset: the door turned it away too
print("held", flush=True)
sys.stdin.readline()
still = 0
for s in held:
    s.settimeout(0.2)
    try:
        still += s.recv(1) != b""
    except socket.timeout:
        still += 1  # open, waiting for us
    except OSError:
        pass
print("open", still, "failed", failed, flush=True)
"""
    p = subprocess.Popen(["nsenter", "-t", str(lab.leader("bastion")), "-a", "--", "python3", "-c", script],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdin is not None
        assert p.stdout.readline().strip() == "held"
        # another address (the host's own loopback) is served meanwhile
        assert status(lab, KEYS["alice"], where="gpu1", address="127.0.0.1")[0] == "200"
        p.stdin.write("\n")
        p.stdin.flush()
        out = p.stdout.readline().split()
    finally:
        p.kill()
        p.wait()
    assert out[0] == "open" and 1 <= int(out[1]) <= 20, out  # 20 at once per address
    # once the slow client is gone, its address is served again: as soon as HAProxy has
    # seen its connections close (on a loaded machine that is not at once), never a limit
    # left behind
    deadline = time.monotonic() + 60
    while (got := status(lab, KEYS["alice"])[0]) != "200" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert got == "200", got


def test_revoked_key_refused_after_next_apply(world: dict[str, Any]) -> None:
    lab: Lab = world["lab"]
    assert status(lab, KEYS["bob"])[0] == "200"
    code, _, err = apply(world, inventory(lab, keys=("alice", "loop")), "no-bob.yml")
    assert code == 0, err
    assert status(lab, KEYS["bob"])[0] == "401"
    assert status(lab, KEYS["alice"])[0] == "200"
    code, _, err = apply(world, inventory(lab))
    assert code == 0, err
    assert status(lab, KEYS["bob"])[0] == "200"


def test_refused_config_leaves_the_old_one_serving(world: dict[str, Any]) -> None:
    lab: Lab = world["lab"]
    before = served_digest(lab)
    # what the host's HAProxy refuses: a combined certificate file it cannot load
    lab.host("gpu1", "sh", "-c", f"cp {TLS}/haproxy.pem {TLS}/haproxy.pem.keep && echo broken > {TLS}/haproxy.pem")
    try:
        code, data, err = apply(world, inventory(lab, keys=("alice", "loop")), "refused.yml")
        assert code == 1, err
        assert "HAProxy refused the new config; the old one keeps serving" in json.dumps(data) + err
        assert served_digest(lab) == before
        assert status(lab, KEYS["bob"])[0] == "200"  # the old config, keys and all
    finally:
        lab.host("gpu1", "mv", f"{TLS}/haproxy.pem.keep", f"{TLS}/haproxy.pem")
    code, _, err = apply(world, inventory(lab))
    assert code == 0, err


def test_port_taken_by_something_else_is_a_clear_error(world: dict[str, Any]) -> None:
    lab: Lab = world["lab"]
    before = served_digest(lab)
    lab.host("gpu1", "systemd-run", "--unit", "door-squatter", "--", "python3", "-m", "http.server",
             "--bind", "0.0.0.0", "8443")
    try:
        for _ in range(50):
            if ":8443" in lab.host("gpu1", "ss", "-Hltn", "sport = :8443").stdout:
                break
            time.sleep(0.1)
        code, data, err = apply(world, inventory(lab, port=8443), "port-taken.yml")
        text = json.dumps(data) + err
        assert code == 1, text
        assert "port 8443 is taken by python3" in text and "door-squatter.service" in text, text
        assert served_digest(lab) == before
    finally:
        lab.host("gpu1", "systemctl", "stop", "door-squatter.service", check=False)


# what testssl rates HIGH/CRITICAL about the door's self-signed placeholder certificate
# (no CA to chain to, no CRL or OCSP URI): the certificate, not the TLS the door speaks;
# a CA's certificate (provision certs) replaces it
PLACEHOLDER = {"cert_chain_of_trust", "cert_revocation"}


def test_testssl_grades_the_door(world: dict[str, Any]) -> None:
    lab: Lab = world["lab"]
    out = "/root/door-testssl.json"
    lab.host("bastion", "rm", "-f", out)
    r = lab.host("bastion", "testssl", "--quiet", "--color", "0", "--warnings", "off",
                 "--ip", lab.addr("gpu1", "prv"), "--jsonfile", out, "-p", "-f", "-S", "-U", "-h",
                 f"https://{NAME}:443", timeout=600, check=False)
    text = lab.host("bastion", "cat", out, check=False).stdout
    assert text.strip(), (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    found = json.loads(text)
    by_id = {f["id"]: f for f in found}
    assert "TLS1" in by_id, (r.stdout[-3000:], found[:20])
    bad = [f for f in found if f.get("severity") in ("HIGH", "CRITICAL") and f["id"] not in PLACEHOLDER]
    assert bad == [], bad
    assert by_id["SSLv2"]["finding"] == by_id["SSLv3"]["finding"] == "not offered"
    assert by_id["TLS1"]["finding"] == by_id["TLS1_1"]["finding"] == "not offered"
    assert by_id["TLS1_3"]["finding"].startswith("offered")
    assert by_id["PFS"]["finding"] == "offered" and by_id["ALPN_HTTP2"]["finding"] == "h2"
    # only forward-secret suites (ECDHE, or TLS 1.3's): no RSA key transport, no static DH
    assert by_id["ROBOT"]["finding"].startswith("not vulnerable, no RSA key transport")
