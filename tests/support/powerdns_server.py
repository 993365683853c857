"""A real PowerDNS Authoritative Server (Debian's pdns-server + pdns-backend-sqlite3) on
127.0.0.1 for the tests: DNS on one free port, the HTTP API on another, a sqlite3
database made from the schema the package ships. Started as a subprocess, ready when
the API answers and a DNS query is answered, stopped at teardown.

Without the packages the tests skip (saying why), except under CI=true, where they fail:
CI installs them (`make deps`, LAB_DEBS)."""

from __future__ import annotations

import json
import os
import secrets
import socket
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PDNS = "/usr/sbin/pdns_server"
SCHEMAS = (Path("/usr/share/doc/pdns-backend-sqlite3/schema.sqlite3.sql"),
           Path("/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql"))


def require_pdns() -> Path:
    """The sqlite3 schema; skip (fail under CI=true) when PowerDNS is not installed."""
    schema = next((s for s in SCHEMAS if s.exists()), None)
    backend = list(Path("/usr/lib").glob("*/pdns/libgsqlite3backend.so"))
    if os.access(PDNS, os.X_OK) and schema is not None and backend:
        return schema
    why = "PowerDNS is not installed (apt-get install pdns-server pdns-backend-sqlite3; make deps)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def _free_port() -> int:
    """A port free for both UDP and TCP on 127.0.0.1 (DNS listens on both)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
            t.bind(("127.0.0.1", 0))
            port = int(t.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                try:
                    u.bind(("127.0.0.1", port))
                except OSError:
                    continue
        return port
    raise RuntimeError("no free port on 127.0.0.1")


@dataclass
class Pdns:
    dns_port: int
    api_port: int
    key: str
    workdir: Path
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """Call the API directly (what someone else editing the zone does)."""
        req = urllib.request.Request(
            f"{self.url}/api/v1/servers/localhost{path}", method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"X-API-Key": self.key, "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            data = r.read()
        return json.loads(data) if data else None

    def create_zone(self, zone: str, rrsets: list[dict[str, Any]] | None = None) -> None:
        """A Native zone served by ns1.<zone> at 127.0.0.1 (its NS set and glue)."""
        self.api("POST", "/zones", {
            "name": zone, "kind": "Native", "nameservers": [f"ns1.{zone}"],
            "rrsets": [{"name": f"ns1.{zone}", "type": "A", "ttl": 300,
                        "records": [{"content": "127.0.0.1", "disabled": False}]},
                       *(rrsets or [])]})

    def delete_zone(self, zone: str) -> None:
        try:
            self.api("DELETE", f"/zones/{zone}")
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise

    def rrsets(self, zone: str) -> dict[tuple[str, str], tuple[int, list[str]]]:
        z = self.api("GET", f"/zones/{zone}")
        return {(s["name"], s["type"]): (s["ttl"], sorted(r["content"] for r in s["records"]))
                for s in z["rrsets"]}

    def set_rrset(self, zone: str, name: str, rtype: str, ttl: int, values: list[str]) -> None:
        self.api("PATCH", f"/zones/{zone}", {"rrsets": [{
            "name": name, "type": rtype, "ttl": ttl, "changetype": "REPLACE",
            "records": [{"content": v, "disabled": False} for v in values]}]})

    def query(self, name: str, rtype: str) -> tuple[str, list[str], bool, int | None]:
        """(rcode, values, AA, ttl) from the server itself, RD off."""
        import dns.flags
        import dns.message
        import dns.query
        import dns.rcode
        import dns.rdatatype

        q = dns.message.make_query(name, rtype)
        q.flags &= ~dns.flags.RD
        r = dns.query.udp(q, "127.0.0.1", port=self.dns_port, timeout=2)
        want = dns.rdatatype.from_text(rtype)
        rrs = [rr for rr in r.answer if rr.rdtype == want]
        return (dns.rcode.to_text(r.rcode()), sorted(x.to_text() for rr in rrs for x in rr),
                bool(r.flags & dns.flags.AA), rrs[0].ttl if rrs else None)


def _ready(p: Pdns, deadline: float) -> None:
    import dns.exception

    while True:
        if p.proc.poll() is not None:
            log = (p.workdir / "pdns.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"pdns_server exited ({p.proc.returncode}): {log}")
        try:
            p.api("GET", "")
            p.query("ready.invalid.", "SOA")  # any answer (REFUSED) means DNS is up
            return
        except (OSError, urllib.error.URLError, dns.exception.DNSException):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextmanager
def pdns_server(tmp: Path) -> Iterator[Pdns]:
    schema = require_pdns()
    tmp.mkdir(parents=True, exist_ok=True)
    db = tmp / "pdns.sqlite3"
    with sqlite3.connect(db) as c:
        c.executescript(schema.read_text())
    (tmp / "pdns.conf").write_text("")  # nothing from /etc/powerdns
    key = secrets.token_hex(16)
    dns_port, api_port = _free_port(), _free_port()
    args = [PDNS, f"--config-dir={tmp}", f"--socket-dir={tmp}", "--guardian=no", "--daemon=no",
            "--disable-syslog", "--write-pid=no", "--launch=gsqlite3",
            f"--gsqlite3-database={db}", "--local-address=127.0.0.1", f"--local-port={dns_port}",
            "--api=yes", f"--api-key={key}", "--webserver=yes", "--webserver-address=127.0.0.1",
            f"--webserver-port={api_port}", "--webserver-allow-from=127.0.0.1",
            "--security-poll-suffix=",        # no query to powerdns.com: loopback only
            "--loglevel=4"]
    log = (tmp / "pdns.log").open("wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    p = Pdns(dns_port, api_port, key, tmp, proc)
    try:
        _ready(p, time.monotonic() + 20)
        yield p
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


KEY_ENV = "PROVISION_POWERDNS_API_KEY"  # where the provider reads the API key and URL
URL_ENV = "PROVISION_POWERDNS_API_URL"
