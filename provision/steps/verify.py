"""After a commit-confirmed change is applied: does it take effect? Pure.

The apply script reads back what the host really does (`sshd -T` per check after the
reload; `iptables-save -t filter` of both families after loading) and this module compares
it with what was installed. A change that does not take effect is rolled back at once by
`provision.hosts.confirm` and the host fails with the cause:

- sshd: every setting of our drop-in must show in `sshd -T`, globally and per user; the
  message names the file and line that wins (`provision.steps.sshd_effect`);
- firewall: our chains must be live exactly as rendered and hooked in, and nothing before
  our jump in the hook chain may accept a new connection that our chain would not
  (another tool's `-j ACCEPT`, ufw's chains): such a rule is named with what it is.
"""

from __future__ import annotations

from dataclasses import replace

from provision.facts import Facts
from provision.facts import sshd_config as SC
from provision.facts.sshd_effective import SshdEffective, settings_of
from provision.firewall import drift as FD
from provision.firewall import parse as FP
from provision.firewall import verdict as FV
from provision.firewall.rules import HOOKS, Family, Ruleset, is_cluster_rule
from provision.text import printable

from . import sshd_effect as E
from .commit import TESTED_KINDS, ApplyResult, CommitConfirmed


def verify(action: CommitConfirmed, result: ApplyResult, facts: Facts | None) -> str | None:
    """Why the applied change does not take effect, or None."""
    if action.kind == "sshd":
        return _sshd(action, result, facts)
    return _firewall(action, result)


def conn_of(spec: str) -> SC.Conn | None:
    """A `-C` spec back into a Conn ("" -> None: plain `sshd -T`)."""
    if not spec:
        return None
    kv = dict(p.partition("=")[::2] for p in spec.split(","))
    return SC.Conn(kv.get("user", ""), kv.get("addr", ""), kv.get("laddr", ""), kv.get("lport", ""))


def _sshd(action: CommitConfirmed, result: ApplyResult, facts: Facts | None) -> str | None:
    (staged,) = [s for s in action.files if s.kind == "sshd"]
    path, content = staged.write.path, staged.write.content
    cfg = facts.get(SC.SPEC) if facts is not None else SC.SshdConfig()
    if cfg.files:
        cfg = cfg.with_file(path, content)
        for s in action.files:
            if s.remove:
                cfg = cfg.with_file(s.write.path, None)
    want = E.hardened(content)
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    named: set[SC.Setting] = set()
    for i, spec in enumerate(action.checks or ("",)):
        lines = result.effective.get(i)
        conn = conn_of(spec)
        who = f" -C {spec}" if spec else ""
        if not lines:
            problems.append(f"sshd -T{who} said nothing after the reload")
            continue
        view = SshdEffective(settings_of(lines), 0)
        if not view.get("port"):  # not a config dump: sshd -T failed and said why
            problems.append(f"sshd -T{who} failed after the reload: "
                            f"{printable(' / '.join(lines[:3]))}")
            continue
        for key, value in want.items():
            have = view.get(key)
            if have.lower() == SC.normal(key, value) or (key, have) in seen:
                continue
            seen.add((key, have))
            origin = SC.winner(cfg, key, conn, have) if cfg.files else None
            m = E.Mismatch(key, have, value, conn.user if conn else "",
                           origin if origin is not None and origin.path != path else None)
            problems.append(m.describe())
            if m.origin is not None:
                named.add(m.origin)
    problems += [x.describe() for x in E.loose(cfg, want) if x.origin not in named]
    if not problems:
        return None
    return f"{path} does not take effect: " + "; ".join(problems)


# --- firewall ----------------------------------------------------------------------------

TOOLS = (("ufw", "ufw"), ("f2b-", "fail2ban"), ("DOCKER", "Docker"), ("KUBE-", "Kubernetes"),
         ("cali-", "Calico"), ("LIBVIRT", "libvirt"), ("FORWARD_", "firewalld"),
         ("INPUT_", "firewalld"), ("IN_", "firewalld"), ("CSF", "csf"), ("sshguard", "sshguard"))


def what(rule: FP.LiveRule) -> str:
    """A rule of the hook chain named by the tool that put it there, when we can tell."""
    target = rule.target
    if target in ("ACCEPT", "DROP", "REJECT"):
        return f"a{'n' if target == 'ACCEPT' else ''} {target} rule"
    for prefix, tool in TOOLS:
        if target.startswith(prefix):
            return f"{tool}'s chain {target}"
    return f"a jump to {target} (another tool's chain)"


def _ports(live: FP.LiveFilter) -> list[int]:
    """One port per class of ports no rule tells apart (every rule boundary, plus one more)."""
    edges = {1, 65535}
    for chain in live.chains.values():
        for r in chain.rules:
            if r.rule.dport is not None:
                lo, hi = r.rule.dport, r.rule.dport_to or r.rule.dport
                edges |= {lo, hi, max(1, lo - 1), min(65535, hi + 1)}
    return sorted(edges)


def _our_jump(live: FP.LiveFilter, chain: str, hook: str) -> tuple[FP.Chain, int] | None:
    """The hook chain and the index of its first jump to `chain` (None: not hooked)."""
    hooked = live.chain(hook)
    if hooked is None:
        return None
    jump = next((i for i, r in enumerate(hooked.rules) if r.target == chain), None)
    return None if jump is None else (hooked, jump)


def in_the_way(live: FP.LiveFilter, chain: str, hook: str) -> list[str]:
    """Rules in `hook` before our jump that let in what `chain` would drop."""
    found = _our_jump(live, chain, hook)
    if found is None:
        return []
    hooked, jump = found
    before = hooked.rules[:jump]
    if not before:
        return []
    ours = replace(live, chains={**live.chains, hook: replace(hooked, rules=(hooked.rules[jump],),
                                                               policy="DROP")})
    packets = [FV.Packet(proto, port) for proto in ("tcp", "udp") for port in _ports(live)]
    allowed = {p: FV.admitted(ours, p, hook) for p in packets}
    out: list[str] = []
    for r in before:
        alone = replace(live, chains={**live.chains, hook: replace(hooked, rules=(r,),
                                                                    policy="DROP")})
        extra = [(p, FV.admitted(alone, p, hook) - allowed[p]) for p in packets]
        wider = [(p, s) for p, s in extra if s]
        if wider:
            p, s = wider[0]
            src = ", ".join(s.cidrs()[:2]) + (" …" if len(s.cidrs()) > 2 else "")
            out.append(f"{printable(what(r))} before {chain} in {hook} (`{printable(r.text)}`) accepts new "
                       f"connections {chain} drops (e.g. {p.proto}/{p.port} from {src})")
    return out


def drops_peers(live: FP.LiveFilter, rendered: Ruleset) -> list[str]:
    """Rules before our jump that drop what our chain accepts from a cluster's peers (a
    training job would hang on them). Other narrowing (fail2ban banning an address from
    ssh) is the other tool's business; a peer's connection is ours to keep open."""
    chain, hook = rendered.chain, rendered.hook
    found = _our_jump(live, chain, hook)
    if found is None:
        return []
    hooked, jump = found
    out: list[str] = []
    for want in rendered.rules:
        if not is_cluster_rule(want) or want.source is None or want.proto is None:
            continue
        port = want.dport or 1
        lost = FV.AddressSet.of(live.family, [want.source]) - FV.admitted(
            live, FV.Packet(want.proto, port), hook)
        if not lost:
            continue
        culprit = next((r for r in hooked.rules[:jump] if r.target not in ("ACCEPT", "RETURN")
                        and (FV.AddressSet.of(live.family, [r.rule.source]) if r.rule.source
                             else FV.AddressSet.everything(live.family)) & lost), None)
        who = (f"{printable(what(culprit))} before {chain} in {hook} (`{printable(culprit.text)}`)"
               if culprit is not None else f"a rule before {chain} in {hook}")
        out.append(f"{who} drops {want.proto}/{port} from {', '.join(lost.cidrs()[:2])}, which "
                   f"{chain} accepts ({printable(want.comment)}): the cluster's traffic never "
                   "reaches it")
    return out


def firewall_problems(files: list[tuple[str, str]], saves: dict[int, str]) -> list[str]:
    """What keeps rendered rules files (kind, content) from taking effect in the live tables
    (`iptables-save -t filter` text per family): our chain missing, different from the file
    or not hooked in, or something before our jump letting in what our chain drops."""
    problems: list[str] = []
    for kind, content in files:
        fam: Family | None = TESTED_KINDS.get(kind)  # type: ignore[assignment]
        if fam is None:
            continue
        if fam not in saves:
            problems.append(f"ip{'6' if fam == 6 else ''}tables-save said nothing")
            continue
        try:
            live = FP.parse_save(saves[fam], fam)
        except FP.ParseError as e:
            problems.append(f"IPv{fam} rules unreadable: {e}")
            continue
        docker = kind.startswith("iptables-docker")
        for name, chain in FP.parse_save(content, fam).chains.items():
            hook = HOOKS.get(name)
            if hook is None:
                continue
            rs = Ruleset(fam, name, hook, tuple(r.rule for r in chain.rules))
            problems += [d.describe() for d in FD.drift(rs, live, hook_required=not docker)
                         if d.kind != "foreign-rule"]
            if not docker:
                problems += [f"IPv{fam}: {w}" for w in in_the_way(live, name, hook)]
                problems += [f"IPv{fam}: {w}" for w in drops_peers(live, rs)]
    return list(dict.fromkeys(problems))


def _firewall(action: CommitConfirmed, result: ApplyResult) -> str | None:
    problems = firewall_problems([(s.kind, s.write.content) for s in action.files], result.saves)
    if not problems:
        return None
    return "the loaded rules do not take effect: " + "; ".join(problems)
