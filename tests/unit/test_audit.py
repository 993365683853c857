"""`provision audit`, pure parts: the audit facts' parsers on output captured in the lab
(`ss`, `iptables-save`, `ip6tables-save`, `sshd -T`, whole probe answers), live rules read back
into `Rule` data, the symbolic firewall verdict, and the live exposure join.

Fixtures: tests/fixtures/facts/{ss,iptables,sshd}/ hold raw command output from a lab gpu1
after `provision apply` (bootstrap); tests/fixtures/audit/ holds whole audit-probe answers from
the same lab (bastion, gpu1 clean, with an undeclared http.server on 0.0.0.0:9999 and a UDP
socket on *:5454, the same opened by hand in iptables, the v6 chain flushed, tensorboard
stopped) and that lab's inventory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from provision.exposure import findings
from provision.exposure import join as JN
from provision.exposure import live as LV
from provision.facts import Facts, parse, probe_script
from provision.facts import sshd_effective as S
from provision.firewall import drift as FD
from provision.firewall import parse as FP
from provision.firewall import verdict as FV
from provision.firewall.rules import Rule, host_firewall
from provision.inventory import Inventory, load_inventory

ROOT = Path(__file__).parent.parent
FIX = ROOT / "fixtures" / "facts"
AUD = ROOT / "fixtures" / "audit"
INV = AUD / "inventory.yml"


@pytest.fixture(scope="module")
def inv() -> Inventory:
    return load_inventory(str(INV))


def probe(name: str, extra: str = "", replace: tuple[tuple[str, str], ...] = ()) -> Facts:
    """A captured probe answer, optionally with records added before `end` or text replaced."""
    text = (AUD / f"{name}.txt").read_text()
    for old, new in replace:
        assert old in text, old
        text = text.replace(old, new)
    if extra:
        text = text.replace("\nend", "\n" + extra.rstrip("\n") + "\nend")
    return parse(text)


def codes(rep: LV.HostReport, severity: str | None = None) -> list[str]:
    return [f.code for f in rep.findings if severity is None or f.severity == severity]


# --- parsers on captured output: tests/facts/{listeners,tcpstates,sshd_effective,docker} ---

def test_sshd_effective_settings_are_looked_up_in_any_case() -> None:
    assert S.SshdEffective(settings={"passwordauthentication": ("no",)}).get("PasswordAuthentication") == "no"


def test_probe_script_has_the_audit_fragments(inv: Inventory) -> None:
    script = probe_script(LV.request(inv))
    for name in LV.AUDIT_FACTS:
        assert f"fact_{name}()" in script and f'fact_{name} "$@"' in script
    assert "fact_packages" not in script


# --- iptables-save read back into Rule data -----------------------------------------------

def live(name: str, family: int) -> FP.LiveFilter:
    return FP.parse_save((FIX / "iptables" / name).read_text(), family)  # type: ignore[arg-type]


def test_bootstrapped_rules_match_the_rendered_ones(inv: Inventory) -> None:
    fw = host_firewall(inv, inv.node("gpu1"))
    v4, v6 = live("gpu1-bootstrapped.v4", 4), live("gpu1-bootstrapped.v6", 6)
    assert FD.drift(fw.v4, v4) == [] and FD.drift(fw.v6, v6) == []
    assert FD.drift(fw.docker_v4, v4, hook_required=False) == []  # no Docker: no DOCKER-USER
    ssh = v4.chains["PROVISION-INPUT"].rules[4].rule
    assert ssh == Rule("ACCEPT", "ssh", source="10.149.2.10/32", proto="tcp", dport=22, ctstate=("NEW",))
    assert v4.chains["INPUT"].policy == "ACCEPT" and v4.chains["PROVISION-INPUT"].policy is None
    assert FV.admitted(v4, FV.Packet("tcp", 22)).cidrs() == ("10.149.2.10/32",)
    assert FV.admitted(v6, FV.Packet("tcp", 22)).cidrs() == ("fd28:6cd2:7156:2::10/128",)
    for port in (8888, 6006, 9999):
        assert not FV.admitted(v4, FV.Packet("tcp", port)) and not FV.admitted(v6, FV.Packet("tcp", port))
    assert not FV.admitted(v4, FV.Packet("udp", 5454))


@pytest.mark.parametrize("host", ["gpu1", "gpu2", "jump"])
def test_rendered_golden_files_read_back_without_drift(host: str) -> None:
    """The renderer's own output, parsed: the round trip renders -> text -> Rule is exact."""
    inv = load_inventory(str(ROOT / "fixtures" / "example.yml"))
    fw = host_firewall(inv, inv.node(host))
    d = ROOT / "golden" / "example" / host / "etc" / "iptables"
    for fam, rs, f in ((4, fw.v4, "rules.v4"), (6, fw.v6, "rules.v6"),
                       (4, fw.docker_v4, "provision-docker.v4"), (6, fw.docker_v6, "provision-docker.v6")):
        text = (d / f).read_text() + f"\n*filter\n:{rs.hook} ACCEPT [0:0]\n-A {rs.hook} -j {rs.chain}\nCOMMIT\n"
        assert FD.drift(rs, FP.parse_save(text, fam)) == [], f  # type: ignore[arg-type]


def test_hand_added_rule_is_drift_and_opens_the_port(inv: Inventory) -> None:
    fw = host_firewall(inv, inv.node("gpu1"))
    v4 = live("gpu1-hand-rule.v4", 4)
    (d,) = FD.drift(fw.v4, v4)
    assert d.kind == "extra-rule" and "--dport 9999" in d.text and "by hand" in d.describe()
    assert FV.admitted(v4, FV.Packet("tcp", 9999)).cidrs() == ("0.0.0.0/0",)
    assert FV.admitted(v4, FV.Packet("tcp", 9998)).cidrs() == ()


def test_flushed_v6_chain(inv: Inventory) -> None:
    fw = host_firewall(inv, inv.node("gpu1"))
    v6 = live("gpu1-v6-flushed.v6", 6)
    assert [d.kind for d in FD.drift(fw.v6, v6)] == ["flushed"]
    assert FV.admitted(v6, FV.Packet("tcp", 22)).cidrs() == ("::/0",)


def test_missing_chain_unhooked_and_foreign_rules(inv: Inventory) -> None:
    fw = host_firewall(inv, inv.node("gpu1"))
    none = FP.parse_save("*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n", 4)
    assert [d.kind for d in FD.drift(fw.v4, none)] == ["missing-chain"]
    assert FV.admitted(none, FV.Packet("tcp", 1)).cidrs() == ("0.0.0.0/0",)
    text = (FIX / "iptables" / "gpu1-bootstrapped.v4").read_text().replace(
        "-A INPUT -j PROVISION-INPUT", "-A INPUT -s 192.0.2.0/24 -p tcp -m tcp --dport 8888 -j ACCEPT")
    v4 = FP.parse_save(text, 4)
    kinds = sorted(d.kind for d in FD.drift(fw.v4, v4))
    assert kinds == ["foreign-rule", "unhooked"]
    # unhooked: INPUT's policy decides, and the foreign rule admits its source first
    assert FV.admitted(v4, FV.Packet("tcp", 8888)).cidrs() == ("0.0.0.0/0",)


def test_verdict_walks_user_chains_returns_and_unknown_matches() -> None:
    text = "\n".join([
        "*filter", ":INPUT DROP [0:0]", ":A - [0:0]", ":B - [0:0]",
        "-A INPUT -i lo -j ACCEPT",
        "-A INPUT -p tcp -m tcp --dport 80 -j A",
        "-A INPUT -p udp -m multiport --dports 1000:2000 -j ACCEPT",  # not modelled: assumed to match
        "-A INPUT -m set --match-set blocked src -j DROP",  # not modelled: assumed not to match
        "-A INPUT -p tcp -m tcp --dport 3000:3010 -s 198.51.100.0/24 -j ACCEPT",
        "-A A -s 10.0.0.0/8 -j RETURN",
        "-A A -j B",
        "-A A -s 192.0.2.0/24 -j ACCEPT",
        "-A B -s 192.0.2.128/25 -j REJECT --reject-with icmp-port-unreachable",
        "COMMIT", ""])
    v4 = FP.parse_save(text, 4)
    assert FV.admitted(v4, FV.Packet("tcp", 80)).cidrs() == ("192.0.2.0/25",)
    assert FV.admitted(v4, FV.Packet("tcp", 3005)).cidrs() == ("198.51.100.0/24",)
    assert FV.admitted(v4, FV.Packet("tcp", 3011)).cidrs() == ()
    assert FV.admitted(v4, FV.Packet("tcp", 1500)).cidrs() == ()  # the multiport rule is udp
    # multiport is not modelled: assumed to match (any udp port), so more looks open, never less
    assert FV.admitted(v4, FV.Packet("udp", 1500)).cidrs() == ("0.0.0.0/0",)
    assert FV.admitted(v4, FV.Packet("udp", 53)).cidrs() == ("0.0.0.0/0",)
    unknown = [r for r in v4.chains["INPUT"].rules if r.unknown]
    assert [r.unknown for r in unknown] == [("-m multiport", "--dports 1000:2000"), ("-m set", "--match-set blocked src")]


def test_docker_user_verdict_for_published_ports(inv: Inventory) -> None:
    text = "\n".join([
        "*filter", ":INPUT ACCEPT [0:0]", ":DOCKER-USER - [0:0]", ":PROVISION-DOCKER - [0:0]",
        "-A DOCKER-USER -j PROVISION-DOCKER",
        '-A PROVISION-DOCKER -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment replies -j RETURN',
        '-A PROVISION-DOCKER -i docker0 -m comment --comment "from containers" -j RETURN',
        '-A PROVISION-DOCKER -s 203.0.113.0/24 -p tcp -m conntrack --ctstate DNAT --ctorigdstport 8000 -j RETURN',
        '-A PROVISION-DOCKER -m conntrack --ctstate DNAT -m comment --comment "other published ports" -j DROP',
        "COMMIT", ""])
    v4 = FP.parse_save(text.replace("COMMIT", "-A DOCKER-USER -j RETURN\nCOMMIT"), 4)
    drifts = FD.drift(host_firewall(inv, inv.node("gpu1")).docker_v4, v4, hook_required=False)
    assert drifts and "foreign-rule" not in {d.kind for d in drifts}  # Docker's bare RETURN: no-op
    assert FV.admitted(v4, FV.Packet("tcp", 8000, dnat=True), "DOCKER-USER").cidrs() == ("203.0.113.0/24",)
    assert FV.admitted(v4, FV.Packet("tcp", 8080, dnat=True), "DOCKER-USER").cidrs() == ()


def test_address_sets() -> None:
    a = FV.AddressSet.of(4, ["10.0.0.0/8", "10.1.0.0/16", "192.0.2.0/24", "::/0"])
    assert a.cidrs() == ("10.0.0.0/8", "192.0.2.0/24")
    b = FV.AddressSet.of(4, ["10.128.0.0/9"])
    assert (a - b).cidrs() == ("10.0.0.0/9", "192.0.2.0/24")
    assert (a & b).cidrs() == ("10.128.0.0/9",) and b.issubset(a) and not a.issubset(b)
    assert (FV.AddressSet.everything(6) - FV.AddressSet.of(6, ["::/1"])).cidrs() == ("8000::/1",)


# --- the live join on whole probe answers ---------------------------------------------------

def test_clean_bootstrapped_hosts(inv: Inventory) -> None:
    for host, name in (("gpu1", "gpu1-clean"), ("bastion", "bastion-clean")):
        rep = LV.report(inv, inv.node(host), probe(name))
        assert codes(rep, "error") == [] and codes(rep, "warning") == [], rep.findings
        assert rep.drift == ()
    rep = LV.report(inv, inv.node("gpu1"), probe("gpu1-clean"))
    ports = {p.port: p for p in rep.ports}
    assert ports[22].level == "jump" and ports[22].v4.sources == ("10.149.2.10/32",)
    assert ports[8888].level == "host" and ports[8888].tunnel and ports[8888].declared == "service jupyter"
    assert ports[6006].level == "host" and ports[6006].process == "tensorboard"
    bastion = LV.report(inv, inv.node("bastion"), probe("bastion-clean"))
    assert {p.port: p.level for p in bastion.ports} == {22: "declared"}
    assert json.dumps(rep.to_json())  # serialisable


def test_undeclared_listener_dropped_is_a_warning(inv: Inventory) -> None:
    rep = LV.report(inv, inv.node("gpu1"), probe("gpu1-planted"))
    warn = {f.subject: f for f in rep.findings if f.code == "undeclared-listener"}
    assert set(warn) == {"gpu1:9999/tcp", "gpu1:5454/udp"}
    assert warn["gpu1:9999/tcp"].severity == "warning" and "python3" in warn["gpu1:9999/tcp"].message
    assert codes(rep, "error") == []


def test_undeclared_listener_opened_by_hand_is_an_error_and_drift(inv: Inventory) -> None:
    rep = LV.report(inv, inv.node("gpu1"), probe("gpu1-planted-opened"))
    assert "undeclared-listener-exposed" in codes(rep, "error")
    (d,) = rep.drift
    assert d.kind == "extra-rule" and "--dport 9999" in d.text
    assert "firewall-extra-rule" in codes(rep)
    p = next(p for p in rep.ports if p.port == 9999)
    assert p.level == "internet" and p.v4.sources == ("0.0.0.0/0",) and p.v6.level == "nowhere"
    assert rep.ports[0].port == 9999  # worst first


def test_v6_only_hole(inv: Inventory) -> None:
    rep = LV.report(inv, inv.node("gpu1"), probe("gpu1-v6-flushed"))
    assert "firewall-flushed" in codes(rep, "error")
    ssh = next(p for p in rep.ports if p.port == 22)
    assert ssh.v4.level == "jump" and ssh.v6.level == "internet" and ssh.v6.sources == ("::/0",)
    hole = next(f for f in rep.findings if f.code == "exposed-beyond-declared")
    assert "IPv6 from ::/0" in hole.message and hole.severity == "error"


def test_stopped_service_is_not_listening(inv: Inventory) -> None:
    rep = LV.report(inv, inv.node("gpu1"), probe("gpu1-tensorboard-stopped"))
    (f,) = [f for f in rep.findings if f.code == "not-listening"]
    assert f.subject == "gpu1/tensorboard" and "6006" in f.message


def test_close_wait_pile_names_the_process(inv: Inventory) -> None:
    line = "closewait\t1      0      127.0.0.1:9998 127.0.0.1:{} users:((\"leaky-server\",pid=798,fd={}))"
    extra = "\n".join(line.format(40000 + i, 3 + i) for i in range(300)) + "\ntcpstate\tCLOSE-WAIT\t300"
    rep = LV.report(inv, inv.node("gpu1"), probe("gpu1-clean", extra))
    (f,) = [f for f in rep.findings if f.code == "close-wait-pile"]
    assert "leaky-server (pid 798) holds 300" in f.message and f.fix
    assert rep.close_wait == (("leaky-server", 798, 300),)
    few = LV.report(inv, inv.node("gpu1"), probe("gpu1-clean", "\n".join(extra.splitlines()[:10])))
    assert "close-wait-pile" not in codes(few)


def test_time_wait_share_of_the_port_range(inv: Inventory) -> None:
    rep = LV.report(inv, inv.node("gpu1"), probe("gpu1-clean", "tcpstate\tTIME-WAIT\t20000"))
    (f,) = [f for f in rep.findings if f.code == "time-wait-share"]
    assert "20000" in f.message or "TIME_WAIT = 7" in f.message
    assert "of the ephemeral port range 32768-60999" in f.message
    assert "time-wait-share" not in codes(LV.report(inv, inv.node("gpu1"),
                                                    probe("gpu1-clean", "tcpstate\tTIME-WAIT\t500")))


def test_jupyter_without_token_is_an_error(inv: Inventory) -> None:
    rep = LV.report(inv, inv.node("gpu1"), probe("gpu1-clean", "jupyter\t127.0.0.1:8899\t917\t200"))
    (f,) = [f for f in rep.findings if f.code == "jupyter-no-token"]
    assert f.severity == "error" and "8899" in f.message
    ok = LV.report(inv, inv.node("gpu1"), probe("gpu1-clean"))  # the rendered config: 403
    assert "jupyter-no-token" not in codes(ok)


def test_jupyter_reachable_from_the_internet(inv: Inventory) -> None:
    facts = probe("gpu1-planted-opened", replace=(("127.0.0.1:8888 ", "0.0.0.0:8888 "),
                                                  ("--dport 9999", "--dport 8888")))
    rep = LV.report(inv, inv.node("gpu1"), facts)
    errs = {f.code for f in rep.findings if f.severity == "error" and f.subject.startswith("gpu1")}
    assert {"code-exec-internet", "wrong-address", "exposed-beyond-declared"} <= errs


def test_security_groups_narrow_the_reach(inv: Inventory) -> None:
    sg = (JN.SgRule("office", "tcp", 9999, 9999, "198.51.100.0/24"),
          JN.SgRule("office", "tcp", 22, 22, "10.149.2.0/24"),
          JN.SgRule("peers", "all", -1, -1, "gpu-servers"))
    rep = LV.report(inv, inv.node("gpu1"), probe("gpu1-planted-opened"), sg)
    p = next(p for p in rep.ports if p.port == 9999)
    assert p.level == "undeclared" and p.v4.sources == ("198.51.100.0/24",)
    assert p.sg == "198.51.100.0/24, sg:gpu-servers"
    ssh = next(p for p in rep.ports if p.port == 22)
    assert ssh.level == "jump" and ssh.v6.level == "host"  # no v6 source in any group
    closed = LV.report(inv, inv.node("gpu1"), probe("gpu1-planted-opened"), ())
    assert next(p for p in closed.ports if p.port == 9999).level == "host"


def test_sshd_and_keys_drift(inv: Inventory) -> None:
    facts = probe("gpu1-clean", replace=(("sshdt\tpasswordauthentication no", "sshdt\tpasswordauthentication yes"),))
    rep = LV.report(inv, inv.node("gpu1"), facts)
    # a way in with a password is an error (no config files probed here: no file:line)
    (f,) = [f for f in rep.findings if f.code == "sshd-weak"]
    assert f.severity == "error" and "passwordauthentication yes" in f.message
    facts = probe("gpu1-clean", replace=(("sshdt\tmaxauthtries 3", "sshdt\tmaxauthtries 6"),))
    rep = LV.report(inv, inv.node("gpu1"), facts)
    (f,) = [f for f in rep.findings if f.code == "sshd-drift"]
    assert f.severity == "warning" and "maxauthtries 6, not 3" in f.message
    # alice's authorized_keys replaced by something else (the sha256 no longer matches)
    text = (AUD / "gpu1-clean.txt").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("file\t/home/alice/.ssh/authorized_keys"))
    parts = line.split("\t")
    parts[2] = "0" * 64
    rep = LV.report(inv, inv.node("gpu1"), probe("gpu1-clean", replace=((line, "\t".join(parts)),)))
    assert [f.subject for f in rep.findings if f.code == "keys-drift"] == ["gpu1/alice"]


def test_docker_published_port_bypassing_input(inv: Inventory) -> None:
    rep = LV.report(inv, inv.node("gpu1"), probe("gpu1-clean", "dockerps\tweb|0.0.0.0:8080->80/tcp"))
    (f,) = [f for f in rep.findings if f.code == "docker-published-exposed"]
    assert "Docker bypasses INPUT" in f.message and rep.docker[0]["reach"] == "internet"
    rep = LV.report(inv, inv.node("gpu1"), probe("gpu1-clean", "dockerps\tdb|127.0.0.1:5432->5432/tcp"))
    assert sorted(codes(rep)) == ["docker-published", "loopback-listener"]


# --- one model, two inputs -----------------------------------------------------------------

@pytest.mark.parametrize("path", [INV, ROOT / "fixtures" / "example.yml", ROOT / "fixtures" / "sg" / "inventory.yml"])
def test_check_and_audit_report_the_same_declared_findings(path: Path) -> None:
    inv = load_inventory(str(path))
    assert LV.declared_findings(inv) == findings(inv)
    from provision.cli import main

    r = CliRunner().invoke(main, ["check", "-i", str(path), "--json", "--no-local-files"])
    # findings about this machine (key files, journals) are check's own, not the model's
    local = {"dns-file-missing", "dns-journal-refused", "ssh-file"}
    from_check = [{k: v for k, v in f.items() if k != "location"} for f in json.loads(r.output)["findings"]
                  if f["code"] not in local]
    assert from_check == [f.__dict__ for f in LV.declared_findings(inv)]


def test_audit_unknown_host_is_a_usage_error() -> None:
    from provision.cli import main

    r = CliRunner().invoke(main, ["audit", "-i", str(INV), "nope"])
    assert r.exit_code == 2 and "nope" in r.output


def test_dhcp_client_port_is_info_while_dropped(inv: Inventory) -> None:
    line = 'ludp\tUNCONN 0 0 0.0.0.0%eth0:68 0.0.0.0:* users:(("dhclient",pid=9,fd=7))'
    rep = LV.report(inv, inv.node("gpu1"), probe("gpu1-clean", line))
    assert [f.severity for f in rep.findings if f.subject == "gpu1:68/udp"] == ["info"]
