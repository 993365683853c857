"""Live firewall rules read back into the renderer's `Rule` data, and what they let in (pure).

`provision audit` probes `iptables-save -t filter` / `ip6tables-save -t filter` on the host;
this module turns that text into chains of `LiveRule`s (a `Rule` plus whatever options it
did not understand), so that:

- `drift(rendered, live)` names every difference from the rendered chains: a chain that is
  missing, flushed or not hooked in, a rule added or removed by hand, and rules in the
  foreign hook chain (INPUT, DOCKER-USER) that provision did not put there;
- `admitted(live, proto, port)` evaluates the live verdict for a NEW connection to a port:
  the source addresses (an `AddressSet`) that INPUT -> our chain -> ... accepts.

The evaluation is symbolic over source addresses and conservative where it cannot know:
a rule with options this module does not understand (`-m set`, `-d`, negations, `-i eth0`)
is assumed to match when it ACCEPTs and not to match when it DROPs, so an unknown rule can
make a port look more exposed than it is, never less. Packets are taken to arrive on a
network interface (not `lo`). No I/O.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import shlex
from collections.abc import Iterable
from dataclasses import field, replace
from typing import Any, Literal, cast

from provision.record import record
from provision.spans import merge as _merge

from .rules import DOCKER_CHAIN, INPUT_CHAIN, Family, Rule, Ruleset

# iptables-save prints ICMP types as numbers; the renderer writes names.
ICMP4_TYPES = {"echo-request": "8", "echo-reply": "0", "destination-unreachable": "3",
               "time-exceeded": "11"}
ICMP6_TYPES = {"echo-request": "128", "echo-reply": "129", "destination-unreachable": "1",
               "router-solicitation": "133", "router-advertisement": "134",
               "neighbour-solicitation": "135", "neighbour-advertisement": "136",
               "neighbor-solicitation": "135", "neighbor-advertisement": "136", "redirect": "137"}
_LIMIT_UNITS = {"s": "sec", "sec": "sec", "second": "sec", "m": "min", "min": "min", "minute": "min",
                "h": "hour", "hour": "hour", "d": "day", "day": "day"}
BUILTIN = ("INPUT", "FORWARD", "OUTPUT")


class ParseError(ValueError):
    """The text is not iptables-save output."""


@record
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


@record
class Chain:
    name: str
    policy: str | None  # ACCEPT/DROP for built-in chains, None for user chains
    rules: tuple[LiveRule, ...] = ()


@record
class LiveFilter:
    """The filter table of one family, as iptables-save printed it."""

    family: Family
    chains: dict[str, Chain] = field(default_factory=dict)

    def chain(self, name: str) -> Chain | None:
        return self.chains.get(name)


# --- parsing ---------------------------------------------------------------------------

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


# --- drift -----------------------------------------------------------------------------

DriftKind = Literal["missing-chain", "flushed", "unhooked", "extra-rule", "missing-rule",
                    "foreign-rule", "unreadable"]


@record
class Drift:
    family: Family
    chain: str
    kind: DriftKind
    text: str  # the rule (live line, or the rendered rule spelt like one) or an explanation

    def describe(self) -> str:
        fam = f"IPv{self.family}"
        return {
            "missing-chain": f"{self.chain} ({fam}) does not exist: the rendered rules are not loaded",
            "flushed": f"{self.chain} ({fam}) is empty: the chain was flushed",
            "unhooked": f"{self.text} ({fam}): nothing jumps to {self.chain}, its rules are not used",
            "extra-rule": f"rule added by hand to {self.chain} ({fam}): {self.text}",
            "missing-rule": f"rule missing from {self.chain} ({fam}): {self.text}",
            "foreign-rule": f"rule in {self.chain} ({fam}) that provision does not manage: {self.text}",
            "unreadable": f"{fam} firewall could not be read: {self.text}",
        }[self.kind]


def rule_text(chain: str, r: Rule, family: Family) -> str:
    """A rendered rule spelt as iptables-save prints it (for drift messages)."""
    parts = [f"-A {chain}"]
    if r.in_iface:
        parts.append(f"-i {r.in_iface}")
    if r.source:
        parts.append(f"-s {r.source}")
    if r.proto:
        parts.append(f"-p {r.proto}")
    if r.icmp_type:
        parts.append(f"--{'icmp' if family == 4 else 'icmpv6'}-type {r.icmp_type}")
    if r.dport:
        parts.append(f"--dport {r.dport}" + (f":{r.dport_to}" if r.dport_to else ""))
    if r.ctstate:
        parts.append(f"--ctstate {','.join(r.ctstate)}")
    if r.ctorigdstport:
        parts.append(f"--ctorigdstport {r.ctorigdstport}")
    parts.append(f'--comment "{r.comment}" -j {r.target}')
    return " ".join(parts)


def _key(r: LiveRule | Rule) -> tuple[Rule, tuple[str, ...]]:
    if isinstance(r, LiveRule):
        return (r.rule, r.unknown)
    return (r, ())


def drift(rendered: Ruleset, live: LiveFilter, *, hook_required: bool = True) -> list[Drift]:
    """What differs between a rendered chain and the live table (both of one family).

    `hook_required=False` for the Docker chain: it is hooked only where Docker runs, so a
    missing hook chain (no DOCKER-USER) is not drift.
    """
    fam, name = rendered.family, rendered.chain
    out: list[Drift] = []
    hook = live.chain(rendered.hook)
    if hook is None and not hook_required:
        return []
    chain = live.chain(name)
    if chain is None:
        return [Drift(fam, name, "missing-chain", "")]
    want = [canonical(r, fam) for r in rendered.rules]
    have = list(chain.rules)
    if not have:
        out.append(Drift(fam, name, "flushed", ""))
    else:
        sm = difflib.SequenceMatcher(a=[_key(r) for r in want], b=[_key(r) for r in have],
                                     autojunk=False)
        for op, a0, a1, b0, b1 in sm.get_opcodes():
            if op in ("replace", "delete"):
                out += [Drift(fam, name, "missing-rule", rule_text(name, r, fam)) for r in want[a0:a1]]
            if op in ("replace", "insert"):
                out += [Drift(fam, name, "extra-rule", r.text) for r in have[b0:b1]]
    if hook is not None:
        jumps = [r for r in hook.rules if r.target == name and not r.unknown
                 and r.rule == Rule(cast(Any, name), "")]
        if not jumps:
            out.append(Drift(fam, name, "unhooked", f"{rendered.hook} has no '-j {name}'"))
        for r in hook.rules:
            # Docker (before 28) ends DOCKER-USER with a bare `-j RETURN`: a no-op, not drift
            noop = r.rule == Rule("RETURN", "") and not r.unknown
            if r not in jumps[:1] and not noop:
                out.append(Drift(fam, rendered.hook, "foreign-rule", r.text))
    return out


# --- evaluation ------------------------------------------------------------------------

Interval = tuple[int, int]


@record
class AddressSet:
    """A set of addresses of one family as sorted, disjoint, inclusive integer intervals."""

    family: Family
    spans: tuple[Interval, ...] = ()

    @classmethod
    def everything(cls, family: Family) -> AddressSet:
        return cls(family, ((0, (1 << (32 if family == 4 else 128)) - 1),))

    @classmethod
    def of(cls, family: Family, cidrs: Iterable[str]) -> AddressSet:
        spans = []
        for c in cidrs:
            net = ipaddress.ip_network(c, strict=False)
            if net.version == family:
                spans.append((int(net.network_address), int(net.broadcast_address)))
        return cls(family, _merge(spans))

    def __bool__(self) -> bool:
        return bool(self.spans)

    def __or__(self, other: AddressSet) -> AddressSet:
        return AddressSet(self.family, _merge([*self.spans, *other.spans]))

    def __and__(self, other: AddressSet) -> AddressSet:
        out, i, j = [], 0, 0
        a, b = self.spans, other.spans
        while i < len(a) and j < len(b):
            lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
            if lo <= hi:
                out.append((lo, hi))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return AddressSet(self.family, tuple(out))

    def __sub__(self, other: AddressSet) -> AddressSet:
        out: list[Interval] = []
        for lo, hi in self.spans:
            cur = lo
            for olo, ohi in other.spans:
                if ohi < cur or olo > hi:
                    continue
                if olo > cur:
                    out.append((cur, olo - 1))
                cur = max(cur, ohi + 1)
                if cur > hi:
                    break
            if cur <= hi:
                out.append((cur, hi))
        return AddressSet(self.family, tuple(out))

    def issubset(self, other: AddressSet) -> bool:
        return not (self - other)

    def cidrs(self) -> tuple[str, ...]:
        cls: Any = ipaddress.IPv4Address if self.family == 4 else ipaddress.IPv6Address
        return tuple(str(n) for lo, hi in self.spans
                     for n in ipaddress.summarize_address_range(cls(lo), cls(hi)))


@record
class Packet:
    """A NEW connection from the network: protocol and destination port. `dnat` marks one
    Docker DNATed to a published port (evaluated from DOCKER-USER, with --ctorigdstport)."""

    proto: str
    port: int
    dnat: bool = False


def _matches(r: LiveRule, p: Packet) -> bool | None:
    """True/False when the rule certainly does / does not match the packet; None: unknown."""
    rule = r.rule
    if rule.in_iface == "lo":
        return False
    if p.dnat and rule.in_iface in ("docker0", "br-+"):
        return False  # from containers: not our packet
    if rule.proto and rule.proto not in (p.proto, "all"):
        return False
    if rule.icmp_type is not None:
        return False
    if rule.dport is not None and not rule.dport <= p.port <= (rule.dport_to or rule.dport):
        return False
    if rule.ctstate:
        state = "DNAT" if p.dnat else "NEW"
        if state not in rule.ctstate and not (p.dnat and "NEW" in rule.ctstate):
            return False
    if rule.ctorigdstport is not None and (not p.dnat or rule.ctorigdstport != p.port):
        return False
    if r.unknown or (rule.in_iface and rule.in_iface != "lo"):
        return None
    return True


def admitted(live: LiveFilter, packet: Packet, start: str = "INPUT") -> AddressSet:
    """The sources from which `start` (INPUT, or DOCKER-USER for a published port) lets the
    packet through. A missing INPUT chain admits everything (no firewall)."""
    everything = AddressSet.everything(live.family)
    chain = live.chain(start)
    if chain is None:
        return everything
    accepted, rest = _walk(live, chain, everything, packet, depth=0)
    if start in BUILTIN:
        return accepted | rest if (chain.policy or "ACCEPT") == "ACCEPT" else accepted
    return accepted | rest  # DOCKER-USER falls through to Docker's own accepting chains


def _walk(live: LiveFilter, chain: Chain, space: AddressSet, p: Packet,
          depth: int) -> tuple[AddressSet, AddressSet]:
    """(accepted, fell through or returned) for the sources in `space` entering `chain`."""
    accepted = returned = AddressSet(live.family)
    if depth > 16:  # a loop iptables itself would refuse; be safe
        return accepted, space
    for r in chain.rules:
        if not space:
            break
        m = _matches(r, p)
        if m is False:
            continue
        src = AddressSet.of(live.family, [r.rule.source]) if r.rule.source else space
        hit = space & src
        if not hit:
            continue
        t = r.target
        if t == "ACCEPT":
            accepted, space = accepted | hit, space - hit
        elif t in ("DROP", "REJECT"):
            if m:
                space = space - hit
        elif t == "RETURN":
            if m:
                returned, space = returned | hit, space - hit
        elif t in live.chains:
            sub_acc, sub_rest = _walk(live, live.chains[t], hit, p, depth + 1)
            accepted = accepted | sub_acc
            if m:
                space = (space - hit) | sub_rest
        # LOG, MARK, ...: not terminating
    return accepted, space | returned


__all__ = ["DOCKER_CHAIN", "INPUT_CHAIN", "AddressSet", "Chain", "Drift", "LiveFilter", "LiveRule",
           "Packet", "ParseError", "admitted", "canonical", "drift", "parse_rule", "parse_save",
           "rule_text"]
