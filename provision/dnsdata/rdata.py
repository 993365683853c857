"""The values of the record types provision manages, checked as text. Pure, no I/O.

Provider answers, journals and markers are checked with these before their values go
into a change (as a prerequisite or as new data): a value that is not exactly an IPv4
address (A), an IPv6 address (AAAA), one absolute host name (CNAME), or one record of
TXT, MX, SRV or CAA data as dnspython parses it, is refused, so a hostile answer or file
can never smuggle other record data, quotes or a second record into the UPDATE message,
the change batch or the Cloud DNS request.

TXT, MX, SRV and CAA values are parsed with dnspython (`dns.rdata.from_text`) and kept
in one canonical presentation form (`canonical`): every provider's spelling of the same
data (quoting, escapes, case of host names and CAA tags, a missing final dot) compares
equal, so a plan never shows a change that is not one.
"""

from __future__ import annotations

import ipaddress
import re

from provision.dnsdata.names import problem
from provision.text import printable

MIGRATE_TYPES = ("A", "AAAA", "CNAME")     # what `dns migrate`, its journals and markers act on
DATA_TYPES = ("TXT", "MX", "SRV", "CAA")  # managed records with no cutover
MANAGED_TYPES = (*MIGRATE_TYPES, *DATA_TYPES)
MIN_TTL, MAX_TTL = 1, 604800
MAX_VALUES = 100          # values in one RRset provision writes (Route53's own limit is 400)
MAX_STRING = 255          # octets of one TXT character-string (RFC 1035 3.3)
MAX_TEXT = 4000           # octets of one TXT value provision writes (Route53's own limit)
# CAA property tags (RFC 8659 4.2-4.4; RFC 9495 issuemail; CA/Browser Forum contact tags).
# RFC 8659 lets a CA ignore a tag it does not know, so a misspelt `isue` would silently
# allow every CA: the inventory may use only these.
CAA_TAGS = ("issue", "issuewild", "iodef", "issuemail", "contactemail", "contactphone")
CAA_CRITICAL = 128        # the only flag RFC 8659 defines; the other bits must be zero
_IP_TEXT = re.compile(r"^[0-9A-Fa-f:.]{2,45}$")
_PRINTABLE_ASCII = re.compile(r"^[\x20-\x7e]*$")
# Cloud DNS refuses other bytes in TXT data, and Route53 spells them as octal escapes
# where the zone-file form (BIND, PowerDNS) has decimal ones: provision writes none
_ASCII_ONLY = ("TXT text must be printable ASCII (letters, digits, spaces and "
               "punctuation; no other characters and no \\DDD escapes): Cloud DNS refuses "
               "the rest, and providers spell it differently")
_CAA_PARAM = re.compile(r"^[A-Za-z0-9]+=[\x21-\x3a\x3c-\x7e]*$")


class BadValue(ValueError):
    """A value provision refuses; the message says why in words."""


def canonical(rtype: str, text: str) -> str:
    """The canonical presentation text of one TXT, MX, SRV or CAA value (host names
    absolute and lowercase, CAA tags lowercase, TXT strings quoted and escaped the way
    dnspython writes them); BadValue saying why when it is not one such value."""
    if rtype not in DATA_TYPES:
        raise BadValue(f"type {rtype} is not one provision manages (only {', '.join(MANAGED_TYPES)})")
    from .presentation import Unparsed, parse

    try:
        p = parse(rtype, text)
    except Unparsed as e:
        raise BadValue(f"not {_article(rtype)} {rtype} value: {_dns_words(str(e))}") from None
    if p.host is not None:
        why = _host_problem(p.host)
        if why:
            what = "the mail exchange" if rtype == "MX" else "the target"
            raise BadValue(f"{what} of the {rtype} value is not a host name: {why}")
    if p.octets > 65000:
        raise BadValue("a TXT value of more than 65000 octets")
    return p.text


def _host_problem(name: str) -> str:
    """An MX exchange or SRV target (absolute, lowercase): a host name provision would
    accept as a record name, or the root (RFC 7505's null MX, RFC 2782's "no service")."""
    if name == ".":
        return ""
    why = problem(name, wildcard=False)
    if not why and name.count(".") < 2:
        why = "a single label (a top-level domain)"
    return why


def _article(rtype: str) -> str:
    return "an" if rtype[0] in "AEFHILMNORSX" else "a"


def _dns_words(text: str) -> str:
    if text == "string too long":
        text = f"a quoted string of more than {MAX_STRING} octets"
    return printable(text[:160])


# --- what the inventory may declare ---------------------------------------------------------

def declared(rtype: str, text: str) -> str:
    """The canonical value of a TXT, MX, SRV or CAA value as the inventory writes it;
    BadValue saying what is wrong and what is allowed.

    TXT: plain text is one string, quoted and split into character-strings of at most
    255 octets by provision; a value that starts with '"' is taken as written in zone-file
    form, one or more quoted strings of at most 255 octets each. MX ``PREFERENCE HOST``,
    SRV ``PRIORITY WEIGHT PORT TARGET``, CAA ``FLAGS TAG "VALUE"``: host names are absolute
    (a final dot is optional), CAA flags 0 or 128, tags those of RFC 8659 and its updates."""
    if rtype == "TXT":
        return _txt(text)
    value = canonical(rtype, text)
    if rtype == "CAA":
        _caa(value)
    return value


def _txt(text: str) -> str:
    from .presentation import parse

    if text.startswith('"'):
        value = canonical("TXT", text)
        p = parse("TXT", value)
        size = p.octets
        if not p.ascii:
            raise BadValue(_ASCII_ONLY)
    elif not _PRINTABLE_ASCII.match(text):
        raise BadValue(_ASCII_ONLY)
    else:
        data = text.encode("utf-8")
        size = len(data)
        value = " ".join(f'"{_escape(chunk)}"' for chunk in _chunks(data))
        value = canonical("TXT", value)
    if size > MAX_TEXT:
        raise BadValue(f"a TXT value of {size} octets, at most {MAX_TEXT}")
    return value


def _chunks(data: bytes) -> list[bytes]:
    """`data` in pieces of at most 255 octets, never inside a UTF-8 character."""
    out, i = [], 0
    while True:
        j = min(i + MAX_STRING, len(data))
        while j < len(data) and j > i and (data[j] & 0xC0) == 0x80:
            j -= 1
        out.append(data[i:j])
        i = j
        if i >= len(data):
            return out


def _escape(chunk: bytes) -> str:
    out = []
    for b in chunk:
        if b in (0x22, 0x5C):
            out.append("\\" + chr(b))
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\{b:03d}")
    return "".join(out)


def _caa(value: str) -> None:
    from .presentation import caa_fields

    flags, tag, v = caa_fields(value)
    if not _PRINTABLE_ASCII.match(v):
        raise BadValue("a CAA value must be printable ASCII (RFC 8659)")
    if flags not in (0, CAA_CRITICAL):
        raise BadValue(f"CAA flags {flags}: 0, or {CAA_CRITICAL} (issuer critical); RFC "
                       "8659 reserves the other bits, which must be zero")
    if tag not in CAA_TAGS:
        raise BadValue(f"CAA tag '{printable(tag[:40])}' is not one of {', '.join(CAA_TAGS)} "
                       "(a CA ignores a tag it does not know: a misspelt one allows every CA)")
    if tag in ("issue", "issuewild", "issuemail"):
        issuer, _, params = v.partition(";")
        issuer = issuer.strip()
        if issuer:
            fq = issuer.lower().rstrip(".") + "."
            why = problem(fq, wildcard=False) or ("a single label" if fq.count(".") < 2 else "")
            if why:
                raise BadValue(f"the CAA {tag} value names '{printable(issuer[:80])}', not an "
                               f"issuer's domain name ({why}); or give \";\" for no CA at all")
        for p in (x.strip() for x in params.split(";")):
            if p and not _CAA_PARAM.match(p):
                raise BadValue(f"the CAA {tag} parameter '{printable(p[:80])}' is not "
                               "key=value (letters and digits, '=', then no spaces or ';')")
    elif tag == "iodef" and not re.match(r"^(mailto:[^\s@]+@[^\s@]+|https?://\S+)$", v):
        raise BadValue(f"the CAA iodef value '{printable(v[:80])}' is not a mailto: address "
                       "or an http(s):// URL (RFC 8659 4.4)")


def value_problem(rtype: str, value: object) -> str:
    """Why `value` is not a valid `rtype` value, or ""."""
    if not isinstance(value, str):
        return f"{type(value).__name__} where a text value was expected"
    if rtype in ("A", "AAAA"):
        want = 4 if rtype == "A" else 6
        if _IP_TEXT.match(value):
            try:
                if ipaddress.ip_address(value).version == want:
                    return ""
            except ValueError:
                pass
        return f"not an IPv{want} address (an {rtype} record holds IPv{want} addresses)"
    if rtype == "CNAME":
        target = value.lower() if value.endswith(".") else value.lower() + "."
        why = problem(target, wildcard=False)
        if not why and target.count(".") < 2:
            why = "a single label (a top-level domain)"
        return f"not a host name: {why}" if why else ""
    if rtype in DATA_TYPES:
        if len(value) > 4 * 65535:
            return f"{len(value)} characters, more than one record holds"
        try:
            canonical(rtype, value)
        except BadValue as e:
            return str(e)
        return ""
    return f"type {rtype} is not one provision manages (only {', '.join(MANAGED_TYPES)})"


def values_problem(rtype: str, values: object) -> str:
    """Why `values` is not a valid set of `rtype` values, or ""."""
    if not isinstance(values, (list, tuple)) or not values:
        return "no values (a list of at least one value was expected)"
    if len(values) > MAX_VALUES:
        return f"{len(values)} values, at most {MAX_VALUES}"
    for v in values:
        why = value_problem(rtype, v)
        if why:
            return f"{_show(v)}: {why}"
    if rtype == "CNAME" and len(set(values)) != 1:
        return "a CNAME holds exactly one target"
    return ""


def ttl_problem(ttl: object) -> str:
    if type(ttl) is not int or not MIN_TTL <= ttl <= MAX_TTL:
        return f"TTL {_show(ttl)} is not a whole number of seconds from {MIN_TTL} to {MAX_TTL}"
    return ""


def _show(v: object) -> str:
    """A short, escaped rendering of a hostile value for a message."""
    text = repr(v) if not isinstance(v, str) else v
    return repr(printable(text[:80]) + ("…" if len(text) > 80 else ""))
