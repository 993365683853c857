"""The RFC 2136 client (I/O, dnspython): reads the zone with a TSIG-signed zone transfer
from the primary; writes one UPDATE message over TCP whose prerequisites say "each RRset
we delete still holds exactly the values we read" and "each RRset we create does not
exist yet", so a record someone else changed since the read is never overwritten
silently (the server answers NXRRSET/YXRRSET and nothing is applied). `wait` polls every
authoritative server of the zone (its NS set) directly, RD off, AA required, until each
serves the change.
"""

from __future__ import annotations

import ipaddress
import socket

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.tsig
import dns.tsigkeyring
import dns.update
import dns.xfr

from provision.dns import tsig
from provision.dns.propagation import authoritative_targets, wait_served
from provision.dns.provider import ProviderError, StaleRead
from provision.dns.rrset import RRset, in_zone, rrset
from provision.dns.tsig import read_tsig_key
from provision.dns.zone_plan import ChangeSet
from provision.dnsdata.provider_settings import Capabilities
from provision.text import printable


def _address_of(server: str) -> str:
    """dnspython talks to addresses: a server given by name is looked up once."""
    try:
        ipaddress.ip_address(server)
        return server
    except ValueError:
        pass
    try:
        return str(socket.getaddrinfo(server, 53, proto=socket.IPPROTO_TCP)[0][4][0])
    except OSError as e:
        raise ProviderError(f"rfc2136: cannot resolve the primary server {server}: {e}") from None


class Rfc2136Provider:
    kind = "rfc2136"

    def __init__(self, zone: str, server: str, port: int, key_file: str | None, *,
                 capabilities: Capabilities,
                 key: tuple[str, str, str] | None = None,
                 resolvers: tuple[str, ...] = (), timeout: float = 5.0,
                 tree: str | None = None):
        # `capabilities`: rfc2136.CAPABILITIES, given by `make` (this module, loaded only
        # to talk to the server, does not import the one the inventory loads)
        self.capabilities = capabilities
        self.zone = zone.rstrip(".").lower() + "."
        self.server = _address_of(server)
        self.port = port
        self.timeout = timeout
        self.resolvers = resolvers
        # `key`: (name, algorithm, secret) from an inventory secret (provision.dns.secret_keys)
        if key is None:
            assert key_file is not None, "a TSIG key file or key"
            key = read_tsig_key(key_file, tree)
        self.key_name, bind_algorithm, secret = key
        self.algorithm = tsig.ALGORITHMS[bind_algorithm]   # the name dnspython signs with
        try:
            self.keyring = dns.tsigkeyring.from_text({self.key_name: (self.algorithm, secret)})
        except Exception:
            # dnspython's words could quote the key; the source is named instead
            raise ProviderError(f"{key_file or 'the TSIG key secret'}: unusable TSIG key") from None

    @property
    def direct(self) -> tuple[str, int]:
        """The primary answers queries for the zone itself, on the port updates go to."""
        return (self.server, self.port)

    # --- read -----------------------------------------------------------------------
    def list_rrsets(self) -> list[RRset]:
        out: dict[tuple[str, str], RRset] = {}
        try:
            for msg in dns.query.xfr(self.server, self.zone, port=self.port, keyring=self.keyring,
                                     keyname=self.key_name, keyalgorithm=self.algorithm,
                                     relativize=False, lifetime=self.timeout * 4,
                                     timeout=self.timeout):
                for rr in msg.answer:
                    rtype = dns.rdatatype.to_text(rr.rdtype)
                    if rtype == "SOA" and (rr.name.to_text().lower(), rtype) in out:
                        continue  # the closing SOA of the transfer
                    key = (rr.name.to_text().lower(), rtype)
                    prev = out.get(key)
                    values = [x.to_text() for x in rr] + (list(prev.values) if prev else [])
                    out[key] = rrset(key[0], rtype, rr.ttl, values)
        except dns.tsig.PeerError as e:
            raise ProviderError(self._tsig_message(str(e) or type(e).__name__)) from None
        except dns.xfr.TransferError as e:
            raise ProviderError(self._refused("zone transfer", str(e))) from None
        except dns.exception.Timeout:
            raise ProviderError(f"rfc2136: {self.server}:{self.port} did not answer the zone "
                                f"transfer of {self.zone} within {self.timeout:g} s") from None
        except (OSError, dns.exception.DNSException) as e:
            raise ProviderError(f"rfc2136: reading {self.zone} from {self.server}:{self.port} "
                                f"failed: {e}") from None
        return sorted(out.values())

    def get_rrset(self, name: str, rtype: str) -> RRset | None:
        try:
            q = dns.message.make_query(name, rtype)
            q.flags &= ~dns.flags.RD
            r = dns.query.tcp(q, self.server, port=self.port, timeout=self.timeout)
        except (OSError, dns.exception.DNSException) as e:
            raise ProviderError(f"rfc2136: query {printable(name)} {rtype} at {self.server}: "
                                f"{printable(str(e))}") from None
        for rr in r.answer:
            if rr.name.to_text().lower() == name.lower() and rr.rdtype == dns.rdatatype.from_text(rtype):
                return rrset(name, rtype, rr.ttl, [x.to_text() for x in rr])
        return None

    # --- write ----------------------------------------------------------------------
    def update_message(self, changes: ChangeSet) -> dns.update.UpdateMessage:
        """The one UPDATE message of `changes`; ProviderError (nothing sent) when a name
        or value cannot be written as DNS data (dnspython's errors never escape)."""
        try:
            return self._update_message(changes)
        except (dns.exception.DNSException, ValueError, TypeError) as e:
            raise ProviderError(f"rfc2136: the change for {self.zone} cannot be written as an "
                                f"UPDATE message ({type(e).__name__}: {printable(str(e)[:200])}); "
                                "nothing was sent") from None

    def _update_message(self, changes: ChangeSet) -> dns.update.UpdateMessage:
        upd = dns.update.Update(self.zone, keyring=self.keyring,
                                keyname=dns.name.from_text(self.key_name),
                                keyalgorithm=self.algorithm)
        deleted = {rr.key for rr in changes.deletions}
        for old in changes.deletions:
            rdatas = [dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.from_text(old.type), v)
                      for v in old.values]
            upd.present(old.name, *rdatas)   # value-dependent: exactly what we read
        for new in changes.additions:
            if new.key not in deleted:
                upd.absent(new.name, new.type)
        for old in changes.deletions:
            upd.delete(old.name, old.type)
        for new in changes.additions:
            assert new.ttl is not None
            upd.add(new.name, new.ttl, new.type, *new.values)
        return upd

    def apply(self, changes: ChangeSet) -> str:
        upd = self.update_message(changes)
        try:
            r = dns.query.tcp(upd, self.server, port=self.port, timeout=self.timeout)
        except dns.tsig.PeerError as e:
            raise ProviderError(self._tsig_message(str(e) or type(e).__name__)) from None
        except dns.exception.Timeout:
            raise ProviderError(f"rfc2136: {self.server}:{self.port} did not answer the update "
                                f"within {self.timeout:g} s (nothing is known to be applied)") from None
        except (OSError, dns.exception.DNSException) as e:
            raise ProviderError(f"rfc2136: update of {self.zone} at {self.server}:{self.port} "
                                f"failed: {e}") from None
        rcode = r.rcode()
        if rcode == dns.rcode.NOERROR:
            return str(r.id)
        text = dns.rcode.to_text(rcode)
        if rcode in (dns.rcode.NXRRSET, dns.rcode.YXRRSET, dns.rcode.NXDOMAIN, dns.rcode.YXDOMAIN):
            raise StaleRead(f"rfc2136: {self.server} refused the update ({text}): a record of "
                            f"{self.zone} changed since it was read, so nothing was applied; "
                            "run plan again to see the zone as it is now")
        if rcode in (dns.rcode.NOTAUTH, dns.rcode.REFUSED):
            raise ProviderError(self._refused("update", text))
        raise ProviderError(f"rfc2136: {self.server} answered the update with {text}; nothing applied")

    def _tsig_message(self, detail: str) -> str:
        return (f"rfc2136: {self.server} rejected TSIG key '{self.key_name}' ({detail}): "
                "wrong key name, secret or algorithm")

    def _refused(self, what: str, detail: str) -> str:
        also = (" (or the server's own checks refused the data: BIND refuses an MX or SRV "
                "record whose target in the zone has no A/AAAA record; its log says which)"
                if what == "update" else "")
        return (f"rfc2136: {self.server} refused the {what} of {self.zone} ({detail}): is TSIG key "
                f"'{self.key_name}' the right one, and allowed to update and transfer the "
                f"zone?{also}")

    # --- wait -----------------------------------------------------------------------
    def nameservers(self) -> list[tuple[str, str | None]]:
        """The zone's NS set as (name, IPv4 address, else IPv6, else None): addresses of
        in-zone names from the primary, others from the configured resolvers."""
        def ask(server: str, name: str, rtype: str, rd: bool) -> list[str]:
            q = dns.message.make_query(name, rtype)
            if not rd:
                q.flags &= ~dns.flags.RD
            try:
                r = dns.query.udp(q, server, port=self.port if not rd else 53, timeout=2)
            except (OSError, dns.exception.DNSException):
                return []
            want = dns.rdatatype.from_text(rtype)
            return [x.to_text() for rr in r.answer if rr.rdtype == want for x in rr]

        names = ask(self.server, self.zone, "NS", False)
        out: list[tuple[str, str | None]] = []
        for ns in sorted(n.lower() for n in names):
            if in_zone(ns, self.zone):
                addrs = ask(self.server, ns, "A", False) or ask(self.server, ns, "AAAA", False)
            else:
                addrs = []
                for res in self.resolvers:
                    addrs = ask(res, ns, "A", True) or ask(res, ns, "AAAA", True)
                    if addrs:
                        break
            out.append((ns, sorted(addrs)[0] if addrs else None))
        return out or [(self.server, self.server)]

    def wait(self, changes: ChangeSet, token: str, timeout: float) -> None:
        targets, unknown = authoritative_targets(self.nameservers(), self.direct, self.resolvers)
        if unknown:
            raise ProviderError(f"rfc2136: cannot find an address for nameserver {unknown[0]} of "
                                f"{self.zone}; add a resolver under dns.resolvers")
        added = {rr.key for rr in changes.additions}
        expect = [(rr.name, rr.type, rr.values) for rr in changes.additions]
        expect += [(rr.name, rr.type, ()) for rr in changes.deletions if rr.key not in added]
        verdicts = wait_served(targets, expect, timeout)
        late = [v for v in verdicts if not v.served]
        if late:
            v = late[0]
            why = "; ".join(v.notes) or "no matching answer"
            raise ProviderError(f"rfc2136: after {timeout:g} s not every authoritative server "
                                f"serves {v.name} {v.type}: {why}")
