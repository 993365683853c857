"""A local HTTP server that follows the Cloud DNS v1 REST API closely enough for the
real google-cloud-dns client: managedZones, paged rrsets, changes that stay `pending` for
a few polls, 409 on creating an existing RRset, 412 on a deletion that does not match;
public and private zones (visibility, privateVisibilityConfig.networks).
Record data is checked per type as the API does (400 `invalid`): A/AAAA addresses; host
names in CNAME, MX and SRV data absolute (with the final dot); TXT, MX, SRV and CAA
parseable; TXT read back as quoted strings (an unquoted word is a string of its own, as
the API splits it), and a deletion matches by record data, not by spelling.

Listens on 127.0.0.1 only. Test hooks: `before_change` runs once before the next POST of
a change is processed (to change the zone "behind the client's back"); `requests` logs
every request line.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import dns.exception
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import yaml

PREFIX = "/dns/v1/projects/"


class FakeCloudDns:
    def __init__(self, page_size: int = 50, pending_polls: int = 2):
        self.page_size = page_size
        self.pending_polls = pending_polls
        self.zones: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[tuple[str, str]] = []
        self.bodies: list[dict[str, Any]] = []
        self.before_change: Callable[[], None] | None = None
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # --- lifecycle -------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeCloudDns:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- state -----------------------------------------------------------------------
    def add_zone(self, project: str, name: str, dns_name: str, *, visibility: str = "public",
                 networks: tuple[str, ...] = ()) -> None:
        """A managed zone; a private one (`visibility`) is visible to `networks` (network
        URLs, as privateVisibilityConfig holds them) and served by Google's private name
        server only, as v1 answers for one."""
        dns_name = dns_name.rstrip(".") + "."
        ns = (["ns-gcp-private.googledomains.com."] if visibility == "private"
              else ["ns-cloud-a1.googledomains.com.", "ns-cloud-a2.googledomains.com."])
        zone: dict[str, Any] = {
            "kind": "dns#managedZone", "name": name, "dnsName": dns_name,
            "id": str(1000 + len(self.zones)), "description": "",
            "creationTime": "2026-01-01T00:00:00.000Z", "nameServers": ns,
            "visibility": visibility}
        if visibility == "private":
            zone["privateVisibilityConfig"] = {
                "kind": "dns#managedZonePrivateVisibilityConfig",
                "networks": [{"kind": "dns#managedZonePrivateVisibilityConfigNetwork",
                              "networkUrl": url} for url in networks]}
        self.zones[(project, name)] = {
            "zone": zone,
            "rrsets": {(dns_name, "SOA"): _rr(dns_name, "SOA", 21600, [
                           f"{ns[0]} cloud-dns-hostmaster.google.com. 1 21600 3600 259200 300"]),
                       (dns_name, "NS"): _rr(dns_name, "NS", 21600, ns)},
            "changes": {},
        }

    def set_rrset(self, project: str, zone: str, name: str, rtype: str, ttl: int,
                  rrdatas: list[str]) -> None:
        with self.lock:
            self.zones[(project, zone)]["rrsets"][(name, rtype)] = _rr(name, rtype, ttl, rrdatas)

    def rrsets(self, project: str, zone: str) -> dict[tuple[str, str], dict[str, Any]]:
        return self.zones[(project, zone)]["rrsets"]

    # --- HTTP --------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, code: int, reason: str, message: str) -> None:
                self._send(code, {"error": {"code": code, "message": message,
                                            "errors": [{"domain": "global", "reason": reason,
                                                        "message": message}]}})

            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path))
                code, body = fake.get(self.path)
                self._send(code, body)

            def do_POST(self) -> None:
                fake.requests.append(("POST", self.path))
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.bodies.append(body)
                code, out = fake.post(self.path, body)
                self._send(code, out)

        return Handler

    def _route(self, path: str) -> tuple[list[str], dict[str, list[str]]]:
        u = urlparse(path)
        if not u.path.startswith(PREFIX):
            return [], {}
        return u.path[len(PREFIX):].split("/"), parse_qs(u.query)

    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        parts, query = self._route(path)
        with self.lock:
            if len(parts) == 2 and parts[1] == "managedZones":
                return 200, {"managedZones": [z["zone"] for (p, _), z in self.zones.items()
                                              if p == parts[0]]}
            z = self.zones.get((parts[0], parts[2])) if len(parts) >= 3 else None
            if z is None:
                return 404, _err(404, "notFound", f"The 'parameters.managedZone' resource named "
                                 f"'{parts[2] if len(parts) > 2 else '?'}' does not exist.")
            if len(parts) == 3:
                return 200, z["zone"]
            if parts[3] == "rrsets":
                items = sorted(z["rrsets"].values(), key=lambda r: (r["name"], r["type"]))
                start = int(query.get("pageToken", ["0"])[0])
                page = items[start:start + self.page_size]
                out: dict[str, Any] = {"kind": "dns#resourceRecordSetsListResponse", "rrsets": page}
                if start + self.page_size < len(items):
                    out["nextPageToken"] = str(start + self.page_size)
                return 200, out
            if parts[3] == "changes" and len(parts) == 5:
                ch = z["changes"].get(parts[4])
                if ch is None:
                    return 404, _err(404, "notFound", f"change {parts[4]} not found")
                ch["_polls"] += 1
                if ch["_polls"] > self.pending_polls:
                    ch["status"] = "done"
                return 200, {k: v for k, v in ch.items() if not k.startswith("_")}
        return 404, _err(404, "notFound", "no such resource")

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        parts, _ = self._route(path)
        if len(parts) != 4 or parts[3] != "changes":
            return 404, _err(404, "notFound", "no such resource")
        if self.before_change is not None:
            hook, self.before_change = self.before_change, None
            hook()
        with self.lock:
            z = self.zones.get((parts[0], parts[2]))
            if z is None:
                return 404, _err(404, "notFound", "managed zone not found")
            rrsets = z["rrsets"]
            deletions = [_canon(d) for d in body.get("deletions", [])]
            additions = [_canon(a) for a in body.get("additions", [])]
            for what, items in (("additions", additions), ("deletions", deletions)):
                for i, r in enumerate(items):
                    why = _invalid(r)
                    if why:
                        return 400, _err(400, "invalid", f"Invalid value for 'entity.change."
                                         f"{what}[{i}].rrdata': {why}")
            additions = [{**a, "rrdatas": [_stored(a["type"], v) for v in a["rrdatas"]]}
                         for a in additions]
            for i, d in enumerate(deletions):
                have = rrsets.get((d["name"], d["type"]))
                if have is None:
                    return 404, _err(404, "notFound", f"The 'entity.change.deletions[{i}]' "
                                     f"resource named '{d['name']} ({d['type']})' does not exist.")
                if (have["ttl"], _data(have)) != (d["ttl"], _data(d)):
                    return 412, _err(412, "conditionNotMet", f"Precondition not met for "
                                     f"'entity.change.deletions[{i}]'")
            deleted = {(d["name"], d["type"]) for d in deletions}
            for i, a in enumerate(additions):
                if (a["name"], a["type"]) in rrsets and (a["name"], a["type"]) not in deleted:
                    return 409, _err(409, "alreadyExists", f"The resource 'entity.change."
                                     f"additions[{i}]' named '{a['name']} ({a['type']})' already exists")
            for key in deleted:
                del rrsets[key]
            for a in additions:
                rrsets[(a["name"], a["type"])] = a
            cid = str(len(z["changes"]) + 1)
            ch = {"kind": "dns#change", "id": cid, "status": "pending",
                  "startTime": "2026-01-01T00:00:00.000Z",
                  "additions": additions, "deletions": deletions, "_polls": 0}
            z["changes"][cid] = ch
            return 200, {k: v for k, v in ch.items() if not k.startswith("_")}


def _rr(name: str, rtype: str, ttl: int, rrdatas: list[str]) -> dict[str, Any]:
    return {"kind": "dns#resourceRecordSet", "name": name, "type": rtype, "ttl": ttl,
            "rrdatas": list(rrdatas)}


def _canon(r: dict[str, Any]) -> dict[str, Any]:
    # the client sends ttl as a string and names as given
    return _rr(r["name"], r["type"], int(r["ttl"]), r.get("rrdatas", []))


_NAMED = {"CNAME": -1, "MX": -1, "SRV": -1, "NS": -1, "PTR": -1}  # host name: the last field


def _invalid(r: dict[str, Any]) -> str:
    """Why the API would refuse the RRset's data, or "" (it checks each rrdata by type)."""
    for v in r["rrdatas"]:
        if not isinstance(v, str) or not v or "\n" in v:
            return f"'{v}' is not record data"
        if r["type"] in _NAMED and not v.split()[_NAMED[r["type"]]].endswith("."):
            return f"the DNS name in '{v}' must be fully qualified (end with a dot)"
        try:
            dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.from_text(r["type"]), v,
                                origin=dns.name.root, relativize=False)
        except (dns.exception.DNSException, ValueError) as e:
            return f"'{v}' is not {r['type']} data ({e})"
    return ""


def _stored(rtype: str, v: str) -> str:
    """The rrdata as the API returns it: TXT as quoted strings, the rest as sent."""
    if rtype != "TXT":
        return v
    rd = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.TXT, v)
    return str(rd.to_text())


def _data(r: dict[str, Any]) -> list[Any]:
    """The record data, compared as the server does (names without case, not spelling)."""
    out = []
    for v in r["rrdatas"]:
        try:
            rd = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.from_text(r["type"]), v,
                                     origin=dns.name.root, relativize=False)
            out.append(rd.to_digestable(dns.name.root))
        except (dns.exception.DNSException, ValueError):
            out.append(v.encode())
    return sorted(out)


def _err(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message,
                      "errors": [{"domain": "global", "reason": reason, "message": message}]}}


@contextmanager
def isolated_fake(monkeypatch: Any, project: str, managed_zone: str, zone: str,
                  **options: Any) -> Iterator[FakeCloudDns]:
    """The fake serving one zone on 127.0.0.1, with nothing able to reach Google: no ADC
    file, and the metadata server pointed at a closed local port."""
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    monkeypatch.setenv("GCE_METADATA_IP", "127.0.0.1:9")
    f = FakeCloudDns(**options).start()
    try:
        f.add_zone(project, managed_zone, zone)
        yield f
    finally:
        f.stop()


def inventory_file(tmp_path: Path, fake: FakeCloudDns, project: str, managed_zone: str,
                   records: dict[str, Any]) -> Path:
    """An inventory whose zone example.org is `fake`'s managed zone, holding `records`."""
    doc = {"version": 1, "dns": {"zones": {"example.org": {
        "provider": "clouddns", "project": project, "managed_zone": managed_zone,
        "endpoint": fake.url, "records": records}}}}
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump(doc))
    return p
