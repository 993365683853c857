"""The firewall's effect, read back (pure): our chains live as rendered and hooked in, and
nothing before our jump letting in what our chain drops (another tool's ACCEPT, ufw)."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.facts import Facts, FileFact, UnitFact
from provision.facts.iptables import IptablesSave
from provision.firewall import parse as FP
from provision.inventory import load_inventory
from provision.steps.actions import WriteFile
from provision.steps.commit import ApplyResult, CommitConfirmed, Staged, apply_script, parse_apply
from provision.steps.files import sha256
from provision.steps.firewall import FirewallStep
from provision.steps.verify import firewall_problems, in_the_way, verify

FIX = Path(__file__).parent.parent / "fixtures"
LIVE = (FIX / "facts" / "iptables" / "gpu1-bootstrapped.v4").read_text()
# the rules file as rendered: the same chain
RENDERED = "\n".join(["*filter", ":PROVISION-INPUT - [0:0]", "-F PROVISION-INPUT",
                      *[ln for ln in LIVE.splitlines() if ln.startswith("-A PROVISION-INPUT")],
                      "COMMIT", ""])


def live(*before: str, chains: tuple[str, ...] = (), ours: bool = True) -> str:
    """The fixture's table with rules inserted before our jump (and extra chains)."""
    out = []
    for ln in LIVE.splitlines():
        if ln == "-A INPUT -j PROVISION-INPUT":
            out += list(before) + ([ln] if ours else [])
        elif ln.startswith(":PROVISION-INPUT"):
            out += [ln, *chains]
        else:
            out.append(ln)
    return "\n".join(out)


def problems(text: str) -> list[str]:
    return firewall_problems([("iptables-v4", RENDERED)], {4: text})


def test_clean_tables_have_no_problem() -> None:
    assert problems(LIVE) == []


@pytest.mark.parametrize("harmless", [
    ["-A INPUT -i lo -j ACCEPT"],
    ["-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"],
    ["-A INPUT -s 10.149.2.10/32 -p tcp -m tcp --dport 22 -j ACCEPT"],  # what ours admits anyway
    ["-A INPUT -p tcp -m multiport --dports 22 -j f2b-sshd"],  # fail2ban only rejects
])
def test_rules_before_ours_that_widen_nothing_are_not_in_the_way(harmless: list[str]) -> None:
    f2b = (":f2b-sshd - [0:0]", "-A f2b-sshd -s 192.0.2.7/32 -j REJECT --reject-with icmp-port-unreachable",
           "-A f2b-sshd -j RETURN")
    assert problems(live(*harmless, chains=f2b)) == []


def test_an_accept_all_before_ours_is_named() -> None:
    (p,) = problems(live("-A INPUT -j ACCEPT"))
    assert "an ACCEPT rule before PROVISION-INPUT in INPUT (`-A INPUT -j ACCEPT`)" in p
    assert "from 0.0.0.0/0" in p


def test_ufw_chains_before_ours_are_named() -> None:
    ufw = (":ufw-before-input - [0:0]", "-A ufw-before-input -p tcp -m tcp --dport 8888 -j ACCEPT")
    (p,) = problems(live("-A INPUT -j ufw-before-input", chains=ufw))
    assert "ufw's chain ufw-before-input" in p and "tcp/8888 from 0.0.0.0/0" in p


def test_missing_flushed_or_unhooked_chain() -> None:
    assert any("nothing jumps to PROVISION-INPUT" in p for p in problems(live(ours=False)))
    flushed = "\n".join(ln for ln in LIVE.splitlines() if not ln.startswith("-A PROVISION-INPUT"))
    assert any("is empty" in p for p in problems(flushed))
    gone = "\n".join(ln for ln in LIVE.splitlines() if "PROVISION-INPUT" not in ln)
    assert any("does not exist" in p for p in problems(gone))
    assert problems("") and "said nothing" in firewall_problems([("iptables-v4", RENDERED)], {})[0]


def test_in_the_way_without_our_jump_says_nothing() -> None:
    t = FP.parse_save(live("-A INPUT -j ACCEPT", ours=False), 4)
    assert in_the_way(t, "PROVISION-INPUT", "INPUT") == []


def test_apply_reads_back_both_families_and_verify_fails_on_what_is_in_the_way() -> None:
    a = CommitConfirmed("firewall", "gpu1", (Staged(WriteFile("/etc/iptables/rules.v4", RENDERED),
                                                    "iptables-v4"),), "provision-firewall.service",
                        script="/usr/local/sbin/provision-firewall")
    s = apply_script(a, "firewall-0a0b", 30)
    assert s.index("systemctl start") < s.index("iptables-save -t filter 2>&1 | sed 's/^/@ipt4\\t/'")
    r = parse_apply("@armed\n@applied\n" + "\n".join(f"@ipt4\t{ln}" for ln in live("-A INPUT -j ACCEPT").splitlines()))
    assert r.message == ""
    why = verify(a, r, None)
    assert why is not None and why.startswith("the loaded rules do not take effect: IPv4: an ACCEPT rule")
    assert verify(a, ApplyResult(saves={4: LIVE}), None) is None


def test_plan_shows_live_rules_that_differ_though_the_files_are_ours() -> None:
    inv = load_inventory(FIX / "example.yml")
    step = FirewallStep.build(inv, inv.node("gpu1"))
    files = {a.path: FileFact(a.path, "file", sha256(a.content), a.mode, a.owner, a.group, 0, a.content)
             for a in step.selected(Facts.of())}
    unit = {step.unit: UnitFact(step.unit, "loaded", "enabled", "active", False, None)}

    def table(content: str, *before: str) -> str:
        rules = [ln for ln in content.splitlines() if ln.startswith("-A ")]
        chain = rules[0].split()[1]
        return "\n".join(["*filter", ":INPUT ACCEPT [0:0]", f":{chain} - [0:0]", *before,
                          f"-A INPUT -j {chain}", *rules, "COMMIT"])

    v4, v6 = (next(a.content for a in step.artifacts if a.kind == k) for k in ("iptables-v4", "iptables-v6"))

    def facts(*before: str) -> Facts:
        f = Facts.of(files=files, units=unit)
        return Facts({**f.values, "iptables": IptablesSave(table(v4, *before), table(v6), 0, 0)})

    assert step.diff(facts()) == []
    (a,) = step.diff(facts("-A INPUT -j ACCEPT"))
    assert any(r.startswith("live rules: IPv4: an ACCEPT rule before PROVISION-INPUT") for r in a.reasons)
    assert not any(s.changed for s in a.files)


def test_audit_reports_a_rule_in_the_way_as_an_error() -> None:
    from provision.exposure import live as LV
    from provision.facts import parse

    inv = load_inventory(FIX / "audit" / "inventory.yml")
    text = (FIX / "audit" / "gpu1-clean.txt").read_text()
    lines = text.splitlines()
    at = lines.index("ipt4\t-A INPUT -j PROVISION-INPUT")
    lines.insert(at, "ipt4\t-A INPUT -j ACCEPT")
    rep = LV.report(inv, inv.node("gpu1"), parse("\n".join(lines) + "\n"))
    (f,) = [f for f in rep.findings if f.code == "firewall-bypassed"]
    assert f.severity == "error" and "`-A INPUT -j ACCEPT`" in f.message
    assert not [f for f in LV.report(inv, inv.node("gpu1"), parse(text)).findings
                if f.code == "firewall-bypassed"]


# --- a cluster's peers: dropped before our jump (issue 35) -----------------------------

PEER = "10.149.2.122/32"
CLUSTER_RULES = [f'-A PROVISION-INPUT -s {PEER} -p {p} -m conntrack --ctstate NEW '
                 f'-m comment --comment "cluster train: gpu2" -j ACCEPT' for p in ("tcp", "udp")]


def _with_cluster(text: str) -> str:
    """`text` (a table or the rendered file) with the cluster rules before our final DROP."""
    lines = text.splitlines()
    last = max(i for i, ln in enumerate(lines) if ln.startswith("-A PROVISION-INPUT"))
    return "\n".join([*lines[:last], *CLUSTER_RULES, *lines[last:]]) + "\n"


def cluster_problems(*before: str, chains: tuple[str, ...] = ()) -> list[str]:
    return firewall_problems([("iptables-v4", _with_cluster(RENDERED))],
                             {4: _with_cluster(live(*before, chains=chains))})


def test_a_cluster_live_as_rendered_has_no_problem() -> None:
    assert cluster_problems() == []


@pytest.mark.parametrize("rule", [
    f"-A INPUT -s {PEER} -j DROP",
    "-A INPUT -s 10.149.2.0/24 -p udp -j REJECT --reject-with icmp-port-unreachable",
])
def test_a_rule_before_ours_that_drops_a_peer_is_named(rule: str) -> None:
    """A training job would hang on it: the apply fails naming the rule, the protocol and
    the peer (before: nothing looked at what is dropped before our jump)."""
    (p, *more) = cluster_problems(rule)
    assert f"(`{rule}`) drops" in p and "from 10.149.2.122/32" in p, p
    assert "(cluster train: gpu2)" in p
    assert all("(`" + rule + "`)" in m for m in more)


def test_fail2ban_rejecting_an_address_from_ssh_is_not_a_cluster_problem() -> None:
    f2b = (":f2b-sshd - [0:0]", f"-A f2b-sshd -s {PEER} -j REJECT --reject-with icmp-port-unreachable",
           "-A f2b-sshd -j RETURN")
    assert cluster_problems("-A INPUT -p tcp -m multiport --dports 22 -j f2b-sshd", chains=f2b) == []
