"""What each authoritative server and resolver answers for a name, and what it means.

The top half is pure: `Answer`s in, a `Verdict` out (who agrees, who does not, why a
resolver may still serve old data, what an NXDOMAIN's negative caching costs). The
bottom half does the I/O with dnspython: `query` asks one server (authoritative servers
directly with RD off, their answers must carry AA), `probe` asks many, `wait_served`
polls until every authoritative server serves the expected data.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from provision.dns.rrset import normalise_value
from provision.dnsdata.visibility import Visibility
from provision.errors import OperationError
from provision.frozen import frozen

if TYPE_CHECKING:  # dnspython is loaded by the queries below, not by importing this module
    import dns.message
    import dns.rdata

Role = Literal["authoritative", "resolver"]


@frozen
class Target:
    label: str          # "ns1.lab.test." or "resolver"
    address: str
    role: Role
    port: int = 53


@frozen
class Answer:
    target: Target
    status: str                      # NOERROR, NODATA, NXDOMAIN, SERVFAIL, REFUSED, TIMEOUT, ERROR
    aa: bool = False
    values: tuple[str, ...] = ()     # sorted; a CNAME found instead is "CNAME target."
    ttl: int | None = None           # remaining TTL (resolvers count down)
    negative_ttl: int | None = None  # for NXDOMAIN/NODATA: min(SOA TTL, SOA minimum)
    error: str = ""

    @property
    def data(self) -> tuple[str, tuple[str, ...]]:
        return (self.status, self.values)


@frozen
class Verdict:
    name: str
    type: str
    expected: tuple[str, ...] | None      # None: no expectation given; () means "absent"
    answers: tuple[Answer, ...]
    disagree: tuple[str, ...]             # labels of servers whose answer differs
    notes: tuple[str, ...]

    @property
    def served(self) -> bool:
        """Every authoritative server answers, authoritatively, with the expected data."""
        auth = [a for a in self.answers if a.target.role == "authoritative"]
        return bool(auth) and not any(a.target.label in self.disagree for a in auth)

    @property
    def ok(self) -> bool:
        return not self.disagree


def _who(t: Target) -> str:
    return t.label if t.label == t.address else f"{t.label} ({t.address})"


def _matches(a: Answer, expected: tuple[str, ...]) -> bool:
    if a.target.role == "authoritative" and not a.aa:
        return False
    if not expected:
        return a.status in ("NXDOMAIN", "NODATA")
    return a.status == "NOERROR" and a.values == expected


def assess(name: str, rtype: str, answers: Sequence[Answer],
           expected: tuple[str, ...] | None = None) -> Verdict:
    """Compare every answer with `expected` (or, without one, with what most
    authoritative servers say) and explain the differences."""
    auth = [a for a in answers if a.target.role == "authoritative"]
    reference = expected
    notes: list[str] = []
    if reference is None:
        settled = [a for a in auth if a.aa and a.status in ("NOERROR", "NXDOMAIN", "NODATA")]
        if settled:
            status, values = Counter(a.data for a in settled).most_common(1)[0][0]
            reference = values if status == "NOERROR" else ()
    disagree = []
    for a in answers:
        if a.status in ("TIMEOUT", "ERROR", "REFUSED", "SERVFAIL"):
            disagree.append(a.target.label)
            notes.append(f"{_who(a.target)} did not answer: "
                         f"{a.error or a.status}")
            continue
        if a.target.role == "authoritative" and not a.aa:
            disagree.append(a.target.label)
            notes.append(f"{_who(a.target)} answered without the AA flag: "
                         "it is not authoritative for this name")
            continue
        if reference is not None and not _matches(a, reference):
            disagree.append(a.target.label)
            want = ", ".join(reference) if reference else "no such record"
            got = ", ".join(a.values) if a.values else a.status
            line = f"{_who(a.target)} answers {got}, expected {want}"
            if a.target.role == "resolver":
                if a.status in ("NXDOMAIN", "NODATA") and a.negative_ttl is not None:
                    line += (f"; it cached the negative answer and keeps it up to "
                             f"{a.negative_ttl} s more (negative caching: the zone's SOA minimum)")
                elif a.ttl is not None:
                    line += f"; cached, it may keep the old answer up to {a.ttl} s more (its remaining TTL)"
            notes.append(line)
    for a in answers:
        if a.status == "NXDOMAIN" and a.negative_ttl is not None and a.target.label not in disagree \
                and a.target.role == "authoritative":
            notes.append(f"{name} does not exist (NXDOMAIN); resolvers cache that for up to "
                         f"{a.negative_ttl} s (the SOA minimum), so a record created now is "
                         "not seen by them before then")
            break
    return Verdict(name, rtype, expected, tuple(answers), tuple(dict.fromkeys(disagree)),
                   tuple(dict.fromkeys(notes)))


# --- I/O (dnspython) ----------------------------------------------------------------------

def query(target: Target, name: str, rtype: str, timeout: float = 2.0) -> Answer:
    """Ask one server; authoritative targets are asked with RD off."""
    import dns.exception
    import dns.flags
    import dns.message
    import dns.query
    import dns.rcode
    import dns.rdatatype

    try:
        q = question(target, name, rtype)
        r = dns.query.udp(q, target.address, port=target.port, timeout=timeout)
        if r.flags & dns.flags.TC:
            r = dns.query.tcp(q, target.address, port=target.port, timeout=timeout)
    except dns.exception.Timeout:
        return Answer(target, "TIMEOUT", error=f"no answer within {timeout:g} s")
    except (OSError, dns.exception.DNSException) as e:
        return Answer(target, "ERROR", error=str(e) or type(e).__name__)
    return parse_response(target, r, name, rtype)


def question(target: Target, name: str, rtype: str) -> dns.message.Message:
    """The query `target` is sent for (name, type): RD off for an authoritative server,
    which must answer from its own data (with AA), not by recursing."""
    import dns.flags
    import dns.message

    q = dns.message.make_query(name, rtype)
    if target.role == "authoritative":
        q.flags &= ~dns.flags.RD
    return q


def resolve_address(name: str, resolvers: Sequence[str]) -> str | None:
    """The first A, then AAAA, address the resolvers give for `name` (a nameserver's name
    resolved to query it directly); None when none answers."""
    for r in resolvers:
        for t in ("A", "AAAA"):
            a = query(Target(r, r, "resolver"), name, t)
            vals = [v for v in a.values if not v.startswith("CNAME ")]
            if vals:
                return vals[0]
    return None


class Unverifiable(OperationError):
    """No server that can see the zone can be asked from here (exit 1): provision says so
    instead of calling the zone verified."""


def authoritative_targets(nameservers: Sequence[tuple[str, str | None]],
                          direct: tuple[str, int] | None,
                          resolvers: Sequence[str], visibility: Visibility = "public",
                          zone: str = "the zone") -> tuple[list[Target], list[str]]:
    """The servers to verify a zone against, from a provider's `nameservers()`: a name
    without an address is resolved through the configured resolvers (only); the server
    the provider talks to directly (`direct`: address, port) is asked on its own port,
    the others on 53. Returns (targets, the names no address was found for).

    A private zone is seen only inside its networks: the provider's name servers are not
    asked (from outside they answer for a public zone of the same name, or refuse), and
    the resolvers in dns.resolvers, which must be inside those networks, are the only
    servers that see it (the callers ask them as resolvers). Without one: Unverifiable;
    so is a public zone whose provider names no nameserver."""
    if visibility == "private":
        if not resolvers:
            raise Unverifiable(
                f"{zone} is a private zone: only resolvers inside its networks see it, and "
                "dns.resolvers lists none, so provision cannot verify what is served (list "
                "a resolver inside the VPC that this machine can reach, e.g. a Route 53 "
                "Resolver inbound endpoint or a Cloud DNS inbound forwarder address)")
        return [], []
    if not nameservers:  # e.g. a hosted zone read without its delegation set
        raise Unverifiable(
            f"the provider names no nameserver for {zone}, so there is no authoritative "
            "server to ask: provision cannot verify what is served (resolvers alone count "
            "TTLs down and answer without AA; they cannot stand in for the zone's servers)")
    targets: list[Target] = []
    unknown: list[str] = []
    for label, addr in nameservers:
        addr = addr or resolve_address(label, resolvers)
        if addr is None:
            unknown.append(label)
            continue
        port = direct[1] if direct is not None and addr == direct[0] else 53
        targets.append(Target(label, addr, "authoritative", port))
    return targets, unknown


def parse_response(target: Target, r: dns.message.Message, name: str, rtype: str) -> Answer:
    import dns.flags
    import dns.name
    import dns.rcode
    import dns.rdatatype

    aa = bool(r.flags & dns.flags.AA)
    rcode = r.rcode()
    qname = dns.name.from_text(name)
    negative = None
    for rr in r.authority:
        if rr.rdtype == dns.rdatatype.SOA:
            negative = min(rr.ttl, rr[0].minimum)
    if rcode == dns.rcode.NXDOMAIN:
        return Answer(target, "NXDOMAIN", aa, negative_ttl=negative)
    if rcode != dns.rcode.NOERROR:
        return Answer(target, dns.rcode.to_text(rcode), aa, error=dns.rcode.to_text(rcode))
    want = dns.rdatatype.from_text(rtype)
    for rr in r.answer:
        if rr.name == qname and rr.rdtype == want:
            return Answer(target, "NOERROR", aa, tuple(sorted(_text(rtype, x) for x in rr)), rr.ttl)
    for rr in r.answer:
        if rr.name == qname and rr.rdtype == dns.rdatatype.CNAME:
            return Answer(target, "NOERROR", aa, tuple(f"CNAME {x.to_text()}" for x in rr), rr.ttl)
    return Answer(target, "NODATA", aa, negative_ttl=negative)


def _text(rtype: str, rdata: dns.rdata.Rdata) -> str:
    return normalise_value(rtype, rdata.to_text())


def probe(targets: Sequence[Target], name: str, rtype: str, timeout: float = 2.0) -> list[Answer]:
    return [query(t, name, rtype, timeout) for t in targets]


def wait_served(targets: Sequence[Target], expectations: Sequence[tuple[str, str, tuple[str, ...]]],
                timeout: float, interval: float = 0.05,
                on_poll: Callable[[list[Verdict]], None] | None = None) -> list[Verdict]:
    """Poll until every authoritative target serves each (name, type, values) — values ()
    meaning absent. Returns the last verdicts; the caller decides what a timeout means."""
    auth = [t for t in targets if t.role == "authoritative"]
    deadline = time.monotonic() + timeout
    pending = list(expectations)
    verdicts: list[Verdict] = []
    while True:
        verdicts = [assess(n, t, probe(auth, n, t, timeout=min(2.0, timeout)), v)
                    for n, t, v in pending]
        if on_poll:
            on_poll(verdicts)
        not_yet = [(v.name, v.type, v.expected or ()) for v in verdicts if not v.served]
        if not not_yet or time.monotonic() >= deadline:
            return verdicts
        pending = not_yet
        time.sleep(interval)
