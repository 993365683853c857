"""Live firewall rules read back into the renderer's `Rule` data (pure).

`provision audit` probes `iptables-save -t filter` / `ip6tables-save -t filter` on the host;
this module turns that text into chains of `LiveRule`s (a `Rule` plus whatever options it
did not understand), and spells a rendered rule the way iptables-save prints it back
(`canonical`). What differs from the rendered chains is `provision.firewall.drift`; what the
live chains let in, `provision.firewall.verdict`. No I/O.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from dataclasses import field, replace
from typing import Any

from provision.frozen import frozen

from .rules import Family, Rule

# iptables-save prints ICMP types as numbers; the renderer writes names.
ICMP4_TYPES = {"echo-request": "8", "echo-reply": "0", "destination-unreachable": "3",
               "time-exceeded": "11"}
ICMP6_TYPES = {"echo-request": "128", "echo-reply": "129", "destination-unreachable": "1",
               "router-solicitation": "133", "router-advertisement": "134",
               "neighbour-solicitation": "135", "neighbour-advertisement": "136",
               "neighbor-solicitation": "135", "neighbor-advertisement": "136", "redirect": "137"}
_LIMIT_UNITS = {"s": "sec", "sec": "sec", "second": "sec", "m": "min", "min": "min", "minute": "min",
                "h": "hour", "hour": "hour", "d": "day", "day": "day"}



class ParseError(ValueError):
    """The text is not iptables-save output."""


@frozen
class LiveRule:
    """One `-A CHAIN ...` line of iptables-save: the `Rule` it means, and what it could not say.

    `rule.target` may also be REJECT, LOG or a user chain here (cast: the renderer's Rule only
    ever carries ACCEPT/DROP/RETURN). `unknown` holds the options this module does not model;
    a rule with any is compared by its text and evaluated conservatively.
    """

    chain: str
    rule: Rule
    text: str  # the line as iptables-save printed it
    unknown: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        return str(self.rule.target)


@frozen
class Chain:
    name: str
    policy: str | None  # ACCEPT/DROP for built-in chains, None for user chains
    rules: tuple[LiveRule, ...] = ()


@frozen
class LiveFilter:
    """The filter table of one family, as iptables-save printed it."""

    family: Family
    chains: dict[str, Chain] = field(default_factory=dict)

    def chain(self, name: str) -> Chain | None:
        return self.chains.get(name)


def _source(value: str, family: Family) -> str:
    net = ipaddress.ip_network(value, strict=False)
    if net.version != family:
        raise ParseError(f"IPv{net.version} source {value} in an IPv{family} table")
    return str(net)


# printable ASCII, spaces and tabs, without the quotes and backslash shlex gives meaning
# to: such a line (most of what iptables-save prints) splits the same on whitespace
_PLAIN = re.compile(r"[ \t!#-&(-\[\]-~]*")


def split_rule(line: str) -> list[str]:
    """A rule line's words, as the shell (and iptables-save's quoting) reads them."""
    if _PLAIN.fullmatch(line):
        return line.split()  # shlex's word loop costs ~0.2 ms a line, a host's plan ~15 ms
    try:
        return shlex.split(line)
    except ValueError as e:
        raise ParseError(f"cannot split {line!r}: {e}") from None


def parse_rule(line: str, family: Family) -> LiveRule:
    """One `-A CHAIN ...` line (without the table context) into a LiveRule."""
    tokens = split_rule(line)
    if len(tokens) < 2 or tokens[0] != "-A":
        raise ParseError(f"not a rule: {line!r}")
    chain = tokens[1]
    fields: dict[str, Any] = {"target": "", "comment": ""}
    unknown: list[str] = []
    i = 2
    known_modules = {"tcp", "udp", "icmp", "icmp6", "conntrack", "comment", "limit", "hl"}

    def value() -> str:
        nonlocal i
        if i + 1 >= len(tokens):
            raise ParseError(f"{tokens[i]} without a value in {line!r}")
        i += 1
        return tokens[i]

    while i < len(tokens):
        t = tokens[i]
        if t == "!":
            unknown.append(" ".join(tokens[i:i + 3]))
            i += 3
            continue
        if t == "-i":
            fields["in_iface"] = value()
        elif t == "-s":
            fields["source"] = _source(value(), family)
        elif t == "-p":
            fields["proto"] = value()
        elif t == "-m":
            mod = value()
            if mod not in known_modules:
                unknown.append(f"-m {mod}")
        elif t in ("--dport", "--destination-port"):
            v = value()
            if v.isdigit():
                fields["dport"] = int(v)
            elif ":" in v and all(p.isdigit() for p in v.split(":", 1)):
                lo, hi = v.split(":", 1)
                fields["dport"], fields["dport_to"] = int(lo), int(hi)
            else:
                unknown.append(f"{t} {v}")
        elif t == "--ctstate":
            fields["ctstate"] = tuple(sorted(value().split(",")))
        elif t == "--ctorigdstport":
            v = value()
            if v.isdigit():
                fields["ctorigdstport"] = int(v)
            else:
                unknown.append(f"{t} {v}")
        elif t in ("--icmp-type", "--icmpv6-type"):
            fields["icmp_type"] = value()
        elif t == "--hl-eq":
            fields["hoplimit"] = int(value())
        elif t == "--limit":
            fields["limit"] = value()
        elif t == "--limit-burst":
            fields["limit_burst"] = int(value())
        elif t == "--comment":
            fields["comment"] = value()
        elif t in ("-j", "-g"):
            fields["target"] = value()
            rest = tokens[i + 1:]
            if rest:  # target options (--reject-with ..., --log-prefix ...)
                unknown += [] if fields["target"] in ("REJECT", "LOG") else [" ".join(rest)]
            break
        else:  # an option we do not model: keep it and its value(s)
            j = i + 1
            while j < len(tokens) and not tokens[j].startswith("-"):
                j += 1
            unknown.append(" ".join(tokens[i:j]))
            i = j
            continue
        i += 1
    rule = canonical(Rule(**fields), family)
    return LiveRule(chain, rule, line, tuple(unknown))


def parse_save(text: str, family: Family) -> LiveFilter:
    """The `*filter` table of iptables-save output (other tables are skipped)."""
    chains: dict[str, tuple[str | None, list[LiveRule]]] = {}
    table = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("*"):
            table = line[1:]
            continue
        if table != "filter":
            continue
        if line == "COMMIT":
            table = None
        elif line.startswith(":"):
            name, _, rest = line[1:].partition(" ")
            policy = rest.split(" ", 1)[0]
            chains[name] = (None if policy == "-" else policy, [])
        elif line.startswith(("-F", "-X", "-N")):
            continue  # in rendered files (`-F CHAIN` before the rules); never in iptables-save
        elif line.startswith("-A "):
            r = parse_rule(line, family)
            if r.chain not in chains:
                chains[r.chain] = (None, [])
            chains[r.chain][1].append(r)
        else:
            raise ParseError(f"unexpected line in the filter table: {line!r}")
    return LiveFilter(family, {n: Chain(n, p, tuple(rs)) for n, (p, rs) in chains.items()})


def canonical(rule: Rule, family: Family) -> Rule:
    """A rule as iptables-save would print it back: ICMP types as numbers, conntrack states
    sorted, limits in `N/sec` form, sources as networks (`/32`, `/128` on single addresses),
    no source for the whole address space."""
    icmp_type = rule.icmp_type
    if icmp_type is not None:
        icmp_type = (ICMP4_TYPES if family == 4 else ICMP6_TYPES).get(icmp_type, icmp_type)
    limit = rule.limit
    if limit is not None and "/" in limit:
        n, _, unit = limit.partition("/")
        limit = f"{n}/{_LIMIT_UNITS.get(unit, unit)}"
    source = str(ipaddress.ip_network(rule.source, strict=False)) if rule.source else None
    if source in ("0.0.0.0/0", "::/0"):  # every source: iptables-save prints no `-s` for it
        source = None
    return replace(rule, icmp_type=icmp_type, limit=limit, source=source,
                   ctstate=tuple(sorted(rule.ctstate)))


__all__ = ["Chain", "LiveFilter", "LiveRule", "ParseError", "canonical", "parse_rule",
           "parse_save", "split_rule"]
