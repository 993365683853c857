"""PowerDNS Authoritative Server through its HTTP API (v1): one zone GET to read, one
PATCH of RRsets to write; the server answers DNS itself, so `wait` asks it directly.

I/O shell. The API has no conditional write (no prerequisite, no If-Match): just before
the PATCH the zone is read again and the write is refused (`StaleRead`, nothing sent)
when an RRset to delete no longer holds exactly what was read or one to create exists,
so a change made since the plan is never overwritten silently (a change landing in the
one round trip between that read and the PATCH is not seen: said in CAPABILITIES).

Every answer of the API is checked before it is used (JSON shape, types, names in the
zone, TTL range, no control characters); anything else is a ProviderError. The API key is
never in the inventory, and the inventory does not choose it: it is the file `api_key_file`
(in the inventory's tree or the provision config directory, and named for the server:
`HOST_PORT.key`), else `$PROVISION_POWERDNS_API_KEY`, used only when
`$PROVISION_POWERDNS_API_URL` names the same server (`provision.dnsdata.secrets`). So changing
`api_url` alone never sends an existing key elsewhere. It is sent only over https:// or to
a loopback address, and redirects are not followed.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import os
import re
import socket
import ssl
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, ClassVar
from urllib.parse import quote, urlsplit

from pydantic import Field, StrictStr, field_validator, model_validator

from provision.dns import secret_keys
from provision.dns.offline import MAX_SECRET, secret_problem
from provision.dns.propagation import authoritative_targets, wait_served
from provision.dns.provider import ProviderError, StaleRead
from provision.dns.rrset import RRset, in_zone, rrset
from provision.dns.zone_plan import ChangeSet
from provision.dnsdata import endpoint
from provision.dnsdata.provider_settings import Capabilities, Credential, FileKind, ProviderSettings
from provision.dnsdata.secrets import config_dir, origin, read_bound, url_key_name
from provision.errors import UsageError
from provision.inventory.fields import Address, FilePath, Port, Url
from provision.secretdata.fields import SecretName
from provision.text import printable, unsafe

if TYPE_CHECKING:
    from provision.inventory.model import Inventory, Zone

MAX_BODY = 64 * 1024 * 1024   # a zone's JSON; more is a server that does not stop
MAX_RRSETS = 1_000_000
MAX_TTL = 2**31 - 1
MAX_SECONDS = 120.0  # one API request, whole answer included
_TYPE = re.compile(r"^[A-Z][A-Z0-9]{0,9}$")
ENV_KEY = "PROVISION_POWERDNS_API_KEY"   # the API key, when no api_key_file is given
ENV_URL = "PROVISION_POWERDNS_API_URL"   # the server that key is for (it goes nowhere else)


class Settings(ProviderSettings):
    api_url: Url = Field(description="the API's base URL (webserver-address:webserver-port), "
                                     "e.g. https://pdns.example.net:8081")
    server_id: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")] = Field(
        "localhost", description="the API's server id")
    api_key_file: FilePath | None = Field(
        None, description="a file holding the API key (one line), in the inventory's tree or "
                          "~/.config/provision, named for the server: HOST_PORT.key (e.g. "
                          "pdns.example.net_8081.key); default: $PROVISION_POWERDNS_API_KEY, "
                          "when $PROVISION_POWERDNS_API_URL names this api_url's server")
    api_key_secret: SecretName | None = Field(
        None, description="the API key from the inventory's secret NAME, whose value is `URL KEY` "
                          "(the key goes only to the server URL names), instead of api_key_file; "
                          "decrypted only by the commands that talk to the server")
    dns_address: Address | None = Field(
        None, description="where the server answers DNS queries (default: the API's host)")
    dns_port: Port = Field(53, description="the server's DNS port")

    local_files: ClassVar[Mapping[str, FileKind]] = {"api_key_file": "secret"}
    secret_fields: ClassVar[tuple[str, ...]] = ("api_key_secret",)
    pattern_words: ClassVar[Mapping[str, str]] = {
        "server_id": "a PowerDNS server id: letters, digits, '.', '_' and '-' (usually "
                     "localhost)"}
    retired: ClassVar[Mapping[str, str]] = {
        "api_key_env": f"an inventory no longer names the variable that holds the API key "
                       f"(it could name any of yours, $GITHUB_TOKEN included, and have it "
                       f"sent to its api_url): the key is ${ENV_KEY}, used when "
                       f"${ENV_URL} names this server, or api_key_file"}

    @field_validator("api_url")
    @classmethod
    def _no_clear_key(cls, url: str) -> str:
        checked = endpoint.checked(url, "the api_url")
        assert checked is not None
        return checked

    @model_validator(mode="after")
    def _one_key(self) -> Settings:
        if self.api_key_file is not None and self.api_key_secret is not None:
            raise ValueError("give the API key as one of api_key_file and api_key_secret, "
                             "not both")
        return self

    def bound_names(self) -> Mapping[str, str]:
        return {"api_key_file": url_key_name(self.api_url)} if self.api_key_file else {}

    def credential(self, zone: str, env: Mapping[str, str],
                   aws_endpoint_url: str | None) -> Credential:
        source = key_source(self, env)
        shown = (source[1] if isinstance(source, tuple)
                 else f"nowhere on this machine ({source})")
        return Credential("powerdns", zone, "API key", shown, f"sent to {origin(self.api_url)}")

    def credentials_url(self, aws_endpoint_url: str | None) -> str | None:
        return self.api_url


CAPABILITIES = Capabilities(
    record_types=frozenset({"A", "AAAA", "CNAME", "TXT", "MX", "SRV", "CAA"}), root_ns=False,
    conditional_write=False,    # re-read just before the PATCH instead (one round trip open)
    replan_on_stale=False, change_ids=False, authoritative=True,
    nameservers="the zone's NS set from the API (in-zone names' addresses from the zone, "
                "others from dns.resolvers); the server itself (dns_address:dns_port) when "
                "it has none")


def make(zone: Zone, inv: Inventory) -> PowerDnsProvider:
    s = zone.settings
    assert isinstance(s, Settings)  # the inventory validated the zone with these settings
    host = urlsplit(s.api_url).hostname or ""
    return PowerDnsProvider(zone.name, s.api_url, _api_key(s, inv, os.environ),
                            server_id=s.server_id,
                            dns_address=_address_of(s.dns_address or host), dns_port=s.dns_port,
                            resolvers=inv.dns.resolvers if inv.dns else ())


def key_source(s: Settings, env: Mapping[str, str]) -> tuple[str, str] | str:
    """Where the API key for `s.api_url` comes from: ("file", PATH) or ("env", "$VAR (…)"),
    or why there is none. Reads no file and sends nothing (`env`: the environment). The
    environment's key is bound to a server by its companion variable: it never goes to an
    api_url that variable does not name."""
    if s.api_key_file is not None:
        return ("file", s.api_key_file)
    if s.api_key_secret is not None:
        return ("secret", f"secret {s.api_key_secret}")
    want = origin(s.api_url)
    if ENV_KEY not in env:
        return (f"${ENV_KEY} is not set; set it and {ENV_URL}={want}, or give api_key_file "
                f"({url_key_name(s.api_url)} in the inventory's directory or "
                f"{config_dir()})")
    named = env.get(ENV_URL, "")
    try:
        bound = origin(named) if named else ""
    except ValueError:
        bound = ""
    if not named:
        return (f"${ENV_KEY} is set, but ${ENV_URL} is not: the key goes only to the server "
                f"that variable names; set {ENV_URL}={want}")
    if bound != want:
        return (f"${ENV_KEY} is for {printable(named)} (${ENV_URL}), not for this zone's "
                f"{want}: it is not sent here")
    return ("env", f"${ENV_KEY} (for {want}, as ${ENV_URL} says)")


def _api_key(s: Settings, inv: Inventory, env: Mapping[str, str]) -> str:
    """The API key (`key_source`); UsageError (bad input, exit 2, nothing sent) when there
    is none for this server, or it is not one line of text."""
    source = key_source(s, env)
    if isinstance(source, str):
        raise UsageError(f"powerdns: no API key for {origin(s.api_url)}: {source}; nothing "
                         "was sent")
    kind, where = source
    if s.api_key_secret is not None:
        name = s.api_key_secret
        return secret_keys.api_key(name, secret_keys.value(inv, name), s.api_url)
    tree = inv.tree
    if kind == "env":
        data = env[ENV_KEY].encode("utf-8", "replace")
    else:
        try:
            data = read_bound(where, MAX_SECRET, "key file", tree, url_key_name(s.api_url))
        except OSError as e:
            raise UsageError(f"powerdns: cannot use the api_key_file {where}: "
                             f"{printable(e.strerror or str(e))}; nothing was sent") from None
    why = secret_problem(data, where)
    if why:
        raise UsageError(f"powerdns: {why}; nothing was sent")
    return data.decode("ascii").strip()


def _address_of(server: str) -> str:
    """DNS queries go to an address: a server given by name is looked up once."""
    try:
        return str(ipaddress.ip_address(server.strip("[]")))
    except ValueError:
        pass
    try:
        return str(socket.getaddrinfo(server, 53, proto=socket.IPPROTO_TCP)[0][4][0])
    except OSError as e:
        raise ProviderError(f"powerdns: cannot resolve the DNS server {printable(server)}: "
                            f"{e}") from None


class PowerDnsProvider:
    kind = "powerdns"
    capabilities = CAPABILITIES

    def __init__(self, zone: str, api_url: str, api_key: str, *, server_id: str = "localhost",
                 dns_address: str = "127.0.0.1", dns_port: int = 53,
                 resolvers: tuple[str, ...] = (), timeout: float = 10.0,
                 deadline: float = MAX_SECONDS):
        why = endpoint.problem(api_url, "powerdns: the api_url")
        if why:  # checked again here: the key is never sent in clear
            raise ProviderError(f"{why}; nothing was sent")
        self.zone = zone.rstrip(".").lower() + "."
        u = urlsplit(api_url)
        self._https = u.scheme == "https"
        self._host = u.hostname or ""
        self._port = u.port or (443 if self._https else 80)
        self._base = u.path.rstrip("/")
        self._key = api_key
        self.server_id = server_id
        self.dns_address = dns_address
        self.dns_port = dns_port
        self.resolvers = resolvers
        self.timeout = timeout
        self.deadline = deadline

    @property
    def direct(self) -> tuple[str, int]:
        """The server answers queries for its zones itself."""
        return (self.dns_address, self.dns_port)

    # --- HTTP ---------------------------------------------------------------------------
    def _zone_path(self) -> str:
        return (f"{self._base}/api/v1/servers/{quote(self.server_id, safe='')}/zones/"
                f"{quote(self.zone, safe='')}")

    def _request(self, method: str, path: str, body: object = None) -> tuple[int, bytes]:
        conn: http.client.HTTPConnection
        if self._https:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout,
                                               context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
        headers = {"X-API-Key": self._key, "Accept": "application/json"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        # `timeout` bounds each read, not the answer: a server that sends a byte every few
        # seconds would hold the run forever. The watchdog shuts the socket at the deadline.
        late = threading.Event()

        def cut() -> None:
            late.set()
            if conn.sock is not None:
                with contextlib.suppress(OSError):  # already closed: nothing to cut
                    conn.sock.shutdown(socket.SHUT_RDWR)

        watchdog = threading.Timer(self.deadline, cut)
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.request(method, path, body=payload, headers=headers)
            r = conn.getresponse()
            data = r.read(MAX_BODY + 1)
        except (OSError, http.client.HTTPException) as e:
            if late.is_set():
                raise ProviderError(f"powerdns: {method} {self._host}:{self._port}: the API "
                                    f"did not answer within {self.deadline:g} s") from None
            raise ProviderError(f"powerdns: {method} {self._host}:{self._port}: cannot reach "
                                f"the API: {printable(str(e) or type(e).__name__)}") from None
        finally:
            watchdog.cancel()
            conn.close()
        if late.is_set():  # cut short by the watchdog, even if what came looked whole
            raise ProviderError(f"powerdns: {method} {self._host}:{self._port}: the API did "
                                f"not answer within {self.deadline:g} s")
        if len(data) > MAX_BODY:
            raise ProviderError(f"powerdns: the API answered more than {MAX_BODY} bytes")
        return r.status, data

    def _error(self, what: str, status: int, data: bytes) -> ProviderError:
        detail = ""
        try:
            doc = json.loads(data.decode("utf-8"))
            if isinstance(doc, dict) and isinstance(doc.get("error"), str):
                detail = ": " + printable(doc["error"][:300])
        except (ValueError, RecursionError):
            pass
        if status in (401, 403):
            return ProviderError(f"powerdns: {what}: the API refused the key (HTTP {status}); "
                                 f"check api_key_file / ${ENV_KEY}")
        if status == 404:
            return ProviderError(f"powerdns: {what}: zone {self.zone} not found on server "
                                 f"'{self.server_id}' (HTTP 404{detail})")
        if 300 <= status < 400:
            return ProviderError(f"powerdns: {what}: the API answered a redirect (HTTP "
                                 f"{status}), which is not followed: the key stays here; "
                                 "give the final URL as api_url")
        return ProviderError(f"powerdns: {what} failed (HTTP {status}{detail})")

    # --- read ---------------------------------------------------------------------------
    def list_rrsets(self) -> list[RRset]:
        return read_zone(self._read(), self.zone)[0]

    def _read(self) -> bytes:
        status, data = self._request("GET", self._zone_path())
        if status != 200:
            raise self._error("reading the zone", status, data)
        return data

    def get_rrset(self, name: str, rtype: str) -> RRset | None:
        return next((rr for rr in self.list_rrsets() if rr.key == (name.lower(), rtype)), None)

    # --- write --------------------------------------------------------------------------
    def apply(self, changes: ChangeSet) -> str:
        patch = patch_body(changes)
        sets, disabled = read_zone(self._read(), self.zone)
        now = {rr.key: rr for rr in sets}
        # A REPLACE or DELETE takes a whole RRset, disabled records too: records provision
        # never saw (the plan reads only what is served) would be lost without a word.
        held = sorted({rr.key for rr in (*changes.additions, *changes.deletions)} & disabled)
        if held:
            name, rtype = held[0]
            raise ProviderError(f"powerdns: {printable(name)} {rtype} holds disabled records, "
                                "which this change would remove (PowerDNS writes whole "
                                "RRsets), so nothing was applied; delete or enable them in "
                                "PowerDNS first")
        for old in changes.deletions:
            if now.get(old.key) != old:
                raise StaleRead(f"powerdns: {old.name} {old.type} changed since it was read, "
                                "so nothing was applied; run plan again to see the zone as "
                                "it is now")
        deleted = {rr.key for rr in changes.deletions}
        for new in changes.additions:
            if new.key not in deleted and new.key in now:
                raise StaleRead(f"powerdns: {new.name} {new.type} was created since the zone "
                                "was read, so nothing was applied; run plan again")
        status, data = self._request("PATCH", self._zone_path(), patch)
        if status not in (200, 204):
            raise self._error("applying the change", status, data)
        return ""  # no change id: `wait` asks the server

    # --- wait ---------------------------------------------------------------------------
    def nameservers(self) -> list[tuple[str, str | None]]:
        """The zone's NS set as (name, address or None): in-zone names' addresses (A,
        else AAAA) from the zone itself; the server itself when the zone has no NS."""
        sets = {rr.key: rr for rr in self.list_rrsets()}
        ns = sets.get((self.zone, "NS"))
        out: list[tuple[str, str | None]] = []
        for name in sorted(ns.values if ns else ()):
            addrs: tuple[str, ...] = ()
            if in_zone(name, self.zone):
                a = sets.get((name, "A")) or sets.get((name, "AAAA"))
                addrs = a.values if a else ()
            out.append((name, addrs[0] if addrs else None))
        return out or [(self.dns_address, self.dns_address)]

    def wait(self, changes: ChangeSet, token: str, timeout: float) -> None:
        targets, unknown = authoritative_targets(self.nameservers(), self.direct, self.resolvers)
        if unknown:
            raise ProviderError(f"powerdns: cannot find an address for nameserver "
                                f"{printable(unknown[0])} of {self.zone}; add a resolver under "
                                "dns.resolvers")
        added = {rr.key for rr in changes.additions}
        expect = [(rr.name, rr.type, rr.values) for rr in changes.additions]
        expect += [(rr.name, rr.type, ()) for rr in changes.deletions if rr.key not in added]
        late = [v for v in wait_served(targets, expect, timeout) if not v.served]
        if late:
            v = late[0]
            why = "; ".join(v.notes) or "no matching answer"
            raise ProviderError(f"powerdns: after {timeout:g} s not every authoritative server "
                                f"serves {v.name} {v.type}: {printable(why)}")


# --- the API's data (pure) ------------------------------------------------------------------

def patch_body(changes: ChangeSet) -> dict[str, object]:
    """The PATCH of `changes`: REPLACE for each RRset written, DELETE for each one gone."""
    written = {rr.key for rr in changes.additions}
    rrsets: list[dict[str, object]] = [
        {"name": rr.name, "type": rr.type, "ttl": rr.ttl, "changetype": "REPLACE",
         "records": [{"content": v, "disabled": False} for v in rr.values]}
        for rr in changes.additions]
    rrsets += [{"name": rr.name, "type": rr.type, "changetype": "DELETE"}
               for rr in changes.deletions if rr.key not in written]
    return {"rrsets": rrsets}


def parse_zone(data: bytes, zone: str) -> list[RRset]:
    """The RRsets of a zone GET's JSON (disabled records are not served: left out);
    ProviderError naming what is wrong with an answer that is not one."""
    return read_zone(data, zone)[0]


def read_zone(data: bytes, zone: str) -> tuple[list[RRset], set[tuple[str, str]]]:
    """`parse_zone`'s RRsets, and the keys of the RRsets holding disabled records."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProviderError("powerdns: the zone's answer is not JSON") from None
    sets = doc.get("rrsets") if isinstance(doc, dict) else None
    if not isinstance(sets, list) or len(sets) > MAX_RRSETS:
        raise ProviderError("powerdns: the zone's answer has no list of rrsets")
    out: dict[tuple[str, str], RRset] = {}
    disabled: set[tuple[str, str]] = set()
    for i, s in enumerate(sets):
        rr, has_disabled = _rrset(s, zone, i)
        if has_disabled:
            disabled.add((str(s["name"]).lower(), str(s["type"])))
        if rr is not None:
            if rr.key in out:
                raise ProviderError(f"powerdns: rrset {i} ({printable(rr.name)} {rr.type}) is "
                                    "listed twice")
            out[rr.key] = rr
    return sorted(out.values()), disabled


def _rrset(s: object, zone: str, i: int) -> tuple[RRset | None, bool]:
    """The RRset of the served records (None when none is), and whether any is disabled."""
    def bad(why: str) -> ProviderError:
        return ProviderError(f"powerdns: rrset {i} of the zone's answer is refused: {why}")

    if not isinstance(s, dict):
        raise bad("not an object")
    name, rtype, ttl, records = s.get("name"), s.get("type"), s.get("ttl"), s.get("records")
    if not isinstance(name, str) or not 1 < len(name) <= 255 or unsafe(name) \
            or any(c.isspace() for c in name):
        raise bad(f"the name {printable(repr(name)[:80])} is not a DNS name")
    if not in_zone(name.lower(), zone):
        raise bad(f"{printable(name[:80])} is outside zone {zone}")
    if not isinstance(rtype, str) or not _TYPE.match(rtype):
        raise bad(f"the type {printable(repr(rtype)[:40])} is not a record type")
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 <= ttl <= MAX_TTL:
        raise bad(f"the TTL {printable(repr(ttl)[:40])} is not a number of seconds")
    if not isinstance(records, list):
        raise bad("records is not a list")
    values = []
    for r in records:
        content = r.get("content") if isinstance(r, dict) else None
        disabled = r.get("disabled", False) if isinstance(r, dict) else None
        if not isinstance(content, str) or len(content) > 65535 or unsafe(content) \
                or "\n" in content or "\r" in content:
            raise bad(f"a record of {printable(name[:80])} {rtype} is not text on one line")
        if not isinstance(disabled, bool):
            raise bad(f"a record of {printable(name[:80])} {rtype} has no true/false 'disabled'")
        if not disabled:
            values.append(content)
    return (rrset(name, rtype, ttl, values) if values else None), len(values) < len(records)
