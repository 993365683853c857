"""What differs between the rendered chains and the live table (pure): a chain that is
missing, flushed or not hooked in, a rule added or removed by hand, and rules in the
foreign hook chain (INPUT, DOCKER-USER) that provision did not put there."""

from __future__ import annotations

import difflib
from typing import Any, Literal, cast

from provision.frozen import frozen

from .parse import LiveFilter, LiveRule, canonical
from .rules import Family, Rule, Ruleset

DriftKind = Literal["missing-chain", "flushed", "unhooked", "extra-rule", "missing-rule",
                    "foreign-rule", "unreadable"]


@frozen
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


__all__ = ["Drift", "DriftKind", "drift", "rule_text"]
