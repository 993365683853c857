"""TXT, MX, SRV and CAA values read with dnspython (`dns.rdata.from_text`): the one
parser of their presentation form. Pure, no I/O.

Imported only when such a value is read (`provision.dnsdata.rdata` imports it in the
functions that need it): `provision check` of an inventory without one loads no
dnspython (tests/integration/test_lazy_imports.py).
"""

from __future__ import annotations

import dns.exception
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.CAA
import dns.rdtypes.ANY.MX
import dns.rdtypes.ANY.TXT
import dns.rdtypes.IN.SRV

from provision.frozen import frozen


class Unparsed(ValueError):
    """Text dnspython does not read as one value of the type (the message says why)."""


@frozen
class Parsed:
    text: str               # canonical presentation: names absolute and lowercase, CAA tag lowercase
    host: str | None        # the MX exchange or SRV target (absolute, lowercase)
    octets: int             # a TXT value's data, all strings together
    ascii: bool = True      # a TXT value's data is printable ASCII only


def parse(rtype: str, text: str) -> Parsed:
    """One value of `rtype` (TXT, MX, SRV, CAA) in canonical form; Unparsed otherwise.
    Relative names are taken from the root: every provider writes absolute names, and
    Route53 takes a name without its final dot as absolute."""
    try:
        rd = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.from_text(rtype), text,
                                 origin=dns.name.root, relativize=False)
    except dns.exception.UnexpectedEnd:
        raise Unparsed("it ends too early (a missing field, or a quote that is never "
                       "closed)") from None
    except (dns.exception.DNSException, ValueError, UnicodeError) as e:
        raise Unparsed(str(e) or type(e).__name__) from None
    host: str | None = None
    octets = 0
    ascii = True
    if isinstance(rd, dns.rdtypes.ANY.MX.MX):
        exchange = rd.exchange.canonicalize()
        rd, host = rd.replace(exchange=exchange), exchange.to_text()
    elif isinstance(rd, dns.rdtypes.IN.SRV.SRV):
        target = rd.target.canonicalize()
        rd, host = rd.replace(target=target), target.to_text()
    elif isinstance(rd, dns.rdtypes.ANY.CAA.CAA):
        rd = rd.replace(tag=rd.tag.lower())
    elif isinstance(rd, dns.rdtypes.ANY.TXT.TXT):
        octets = sum(len(s) for s in rd.strings)
        ascii = all(0x20 <= b < 0x7F for s in rd.strings for b in s)
    else:  # a generic `\# ...` spelling of another type cannot get here: from_text types it
        raise Unparsed(f"not a {rtype} value")
    return Parsed(str(rd.to_text()), host, octets, ascii)


def caa_fields(value: str) -> tuple[int, str, str]:
    """(flags, tag, value) of a canonical CAA value (the value's octets as latin-1)."""
    rd = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.CAA, value)
    assert isinstance(rd, dns.rdtypes.ANY.CAA.CAA)
    return rd.flags, rd.tag.decode("ascii"), rd.value.decode("latin-1")
