"""sshd's configuration read as sshd reads it, and the effect of our drop-in (pure).

Fixtures: tests/fixtures/sshd_config/<case>/ laid out relative to /etc/ssh (a cloud image
with cloud-init's drop-ins, Match blocks, lines above the Include, no Include at all).
The reader is also checked against the real `sshd -T -f` on every fixture when this machine
has sshd and we are root (the lab's machine): the fixtures are what sshd really does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.facts import parse
from provision.facts import sshd_config as SC
from provision.facts.sshd_effective import SPEC as EFF
from provision.facts.support import refusal, sshd_refusal
from provision.facts.system import SPEC as SYSTEM
from provision.facts.system import System
from provision.inventory import load_inventory
from provision.inventory.model import Inventory
from provision.render import SSHD_DROPIN
from provision.steps import sshd_effect as E
from provision.steps.commit import ApplyResult, apply_script, parse_apply, rollback_now_script
from provision.steps.sshd import SshdStep
from provision.steps.step import Refused
from provision.steps.verify import verify
from tests.support.probe_records import answer, file_rec, unit_block

FIX = Path(__file__).parent.parent / "fixtures"
CASES = FIX / "sshd_config"
D = "/etc/ssh/sshd_config.d"


def load(case: str) -> SC.SshdConfig:
    base = CASES / case
    return SC.SshdConfig({f"/etc/ssh/{p.relative_to(base)}": p.read_text()
                          for p in sorted(base.rglob("*")) if p.is_file() and p.name != "README"})


def where(cfg: SC.SshdConfig, key: str, conn: SC.Conn | None = None) -> str:
    w = SC.winner(cfg, key, conn)
    return "default" if w is None else f"{w.where()} {w.value}"


# --- the reader -------------------------------------------------------------------------------

def test_first_value_wins_across_dropins_in_c_order() -> None:
    cfg = load("cloud-image")
    assert where(cfg, "PasswordAuthentication") == f"{D}/50-cloud-init.conf:1 yes"
    assert where(cfg, "authenticationmethods") == f"{D}/50-cloud-init.conf:2 any"
    # the .bak file is not *.conf, a dot file is not matched by *: neither is read
    assert where(cfg, "permitrootlogin") == "default"
    assert where(cfg, "permitemptypasswords") == "default"
    # with ours read first (00-), ours wins
    ours = cfg.with_file(SSHD_DROPIN, "PasswordAuthentication no\n")
    assert where(ours, "passwordauthentication") == f"{SSHD_DROPIN}:1 no"


def test_a_line_above_the_include_wins_over_every_dropin() -> None:
    cfg = load("above-include").with_file(SSHD_DROPIN, "KbdInteractiveAuthentication no\n"
                                                       "PermitRootLogin prohibit-password\n")
    assert where(cfg, "kbdinteractiveauthentication") == "/etc/ssh/sshd_config:1 yes"
    assert where(cfg, "permitrootlogin") == "/etc/ssh/sshd_config:2 yes"  # quotes dropped


def test_match_blocks_apply_per_connection_and_end_with_their_file() -> None:
    cfg = load("match")
    alice, bob = SC.Conn("alice", "10.1.2.3"), SC.Conn("bob", "10.1.2.3")
    carol, dave = SC.Conn("carol", "10.9.1.1"), SC.Conn("dave", "192.168.1.1")
    assert where(cfg, "passwordauthentication", alice) == f"{D}/10-alice.conf:3 yes"
    assert where(cfg, "passwordauthentication", bob) == "default"
    assert where(cfg, "passwordauthentication") == "default"  # plain sshd -T: no Match
    # 20-after.conf comes after a Match in 10-alice.conf: global again
    assert where(cfg, "maxauthtries", bob) == f"{D}/20-after.conf:1 5"
    # Address with a negated CIDR, User with a negated name
    assert where(cfg, "kbdinteractiveauthentication", alice).startswith("/etc/ssh/sshd_config:124 yes")
    assert where(cfg, "kbdinteractiveauthentication", bob) == "/etc/ssh/sshd_config:62 no"
    assert where(cfg, "kbdinteractiveauthentication", carol) == "/etc/ssh/sshd_config:62 no"
    assert where(cfg, "kbdinteractiveauthentication", dave) == "/etc/ssh/sshd_config:62 no"
    # after `Match all`: global
    assert where(cfg, "permitemptypasswords") == "/etc/ssh/sshd_config:128 yes"


def test_a_group_match_we_cannot_evaluate_is_named_only_when_it_explains_the_value() -> None:
    cfg = load("match")
    alice = SC.Conn("alice", "10.1.2.3")
    assert SC.winner(cfg, "permitrootlogin", alice) is None
    w = SC.winner(cfg, "permitrootlogin", alice, have="yes")
    assert w is not None and not w.certain and "may apply" in w.describe()
    assert w.where() == "/etc/ssh/sshd_config:126" and w.match == "Match Group staff"


def test_include_detection() -> None:
    assert SC.included(load("cloud-image"), SSHD_DROPIN)
    assert not SC.included(load("no-include"), SSHD_DROPIN)
    assert "has no `Include" in (sshd_refusal(load("no-include"), SSHD_DROPIN) or "")
    assert sshd_refusal(SC.SshdConfig(), SSHD_DROPIN) is None  # not probed: no refusal
    inside = SC.SshdConfig({"/etc/ssh/sshd_config": f"Match User x\nInclude {D}/*.conf\n"})
    assert not SC.included(inside, SSHD_DROPIN)  # only inside a Match block


# --- facts ------------------------------------------------------------------------------------

def cf(path: str, text: str) -> list[str]:
    """A config file as the probe reports it."""
    return [f"sshdcf\t{path}", *(f"sshdln\t{path}\t{n}\t{ln}"
                                 for n, ln in enumerate(text.splitlines(), start=1))]


def facts_of(case: str, *, dropin: str | None, effective: dict[str, str],
             users: dict[str, dict[str, str]] | None = None, extra: tuple[str, ...] = ()) -> object:
    cfg = load(case)
    recs = [r for p, t in cfg.files.items() for r in cf(p, t)]
    if dropin is not None:
        recs += cf(SSHD_DROPIN, dropin)
        recs.append(file_rec(SSHD_DROPIN, dropin, mode="600"))
    else:
        recs.append(f"file\t{SSHD_DROPIN}\tabsent")
    recs += [f"sshdt\t{k} {v}" for k, v in effective.items()] + ["sshdrc\t0"]
    recs.append("sshdconn\t10.1.2.3\t10.1.2.21\t22")
    for u, eff in (users or {}).items():
        recs += [f"sshdc\t{u}\t{k} {v}" for k, v in eff.items()] + [f"sshdcrc\t{u}\t0"]
    return parse(answer(*recs, *extra))


@pytest.fixture(scope="module")
def inv() -> Inventory:
    return load_inventory(FIX / "example.yml")


def hardened_effective(step: SshdStep) -> dict[str, str]:
    return {k: SC.normal(k, v) for k, v in E.hardened(step.content).items()}


def test_probe_records_parse_per_user(inv: Inventory) -> None:
    step = SshdStep.build(inv, inv.node("gpu1"))
    f = facts_of("cloud-image", dropin=step.content, effective={"passwordauthentication": "no"},
                 users={"alice": {"passwordauthentication": "yes"}})
    eff = f.get(EFF)  # type: ignore[attr-defined]
    assert eff.get("passwordauthentication") == "no"
    assert eff.users["alice"].get("passwordauthentication") == "yes"
    assert (eff.addr, eff.laddr, eff.lport) == ("10.1.2.3", "10.1.2.21", "22")
    assert E.conns(eff)["alice"].spec() == "user=alice,host=10.1.2.3,addr=10.1.2.3,laddr=10.1.2.21,lport=22"


def test_step_asks_sshd_about_the_operator_and_the_team(inv: Inventory) -> None:
    step = SshdStep.build(inv, inv.node("gpu1"))
    r = step.request()
    assert r.sshd_users[0] == inv.node("gpu1").user
    assert set(r.sshd_users[1:]) == {p.name for p in inv.team}
    assert {"sshd_effective", "sshd_config"} <= r.spec_names()
    assert [a for a in r.args() if a.startswith("C:")] == [f"C:{u}" for u in r.sshd_users]


def test_ours_in_place_but_overridden_is_a_change_naming_the_file(inv: Inventory) -> None:
    step = SshdStep.build(inv, inv.node("gpu1"))
    eff = {**hardened_effective(step), "passwordauthentication": "yes", "authenticationmethods": "any"}
    # cloud-init's 50- file sorts after ours (00-): one that sorts before it wins
    early = "PasswordAuthentication yes\nAuthenticationMethods any\n"
    f = facts_of("cloud-image", dropin=step.content, effective=eff,
                 extra=tuple(cf(f"{D}/00-aaa.conf", early)))
    (a,) = step.diff(f)  # type: ignore[arg-type]
    why = "; ".join(a.reasons)
    assert (f"not in effect: sshd -T shows passwordauthentication yes, not no: {D}/00-aaa.conf:1 "
            "sets passwordauthentication yes, read before ours") in why
    assert f"authenticationmethods any, not publickey: {D}/00-aaa.conf:2" in why
    assert not any(s.changed for s in a.files)  # the file itself is ours
    assert a.checks[0] == "" and len(a.checks) == 1  # no -C users probed in this fixture


def test_clean_host_is_no_change(inv: Inventory) -> None:
    step = SshdStep.build(inv, inv.node("gpu1"))
    f = facts_of("cloud-image", dropin=step.content, effective=hardened_effective(step),
                 users={"alice": hardened_effective(step)})
    assert step.diff(f) == []  # type: ignore[arg-type]


def test_our_old_dropin_is_removed_with_the_commit(inv: Inventory) -> None:
    step = SshdStep.build(inv, inv.node("gpu1"))
    old = "/etc/ssh/sshd_config.d/50-provision.conf"
    f = facts_of("cloud-image", dropin=None, effective={}, extra=(
        file_rec(old, "# Managed by provision for gpu1; do not edit.\nX11Forwarding no\n"),))
    (a,) = step.diff(f)  # type: ignore[arg-type]
    assert [(s.write.path, s.remove) for s in a.files] == [(SSHD_DROPIN, False), (old, True)]
    script = apply_script(a, "sshd-0a0b", 30)
    assert f"rm -f {old}" in script and f'[ "$f" = {old} ] && continue' in script
    # someone else's file of that name is left alone
    f = facts_of("cloud-image", dropin=None, effective={}, extra=(file_rec(old, "X11Forwarding no\n"),))
    (a,) = step.diff(f)  # type: ignore[arg-type]
    assert [s.write.path for s in a.files] == [SSHD_DROPIN]


# --- after the reload ------------------------------------------------------------------------

def test_apply_script_reads_back_sshd_per_check_and_the_result_parses(inv: Inventory) -> None:
    step = SshdStep.build(inv, inv.node("gpu1"))
    f = facts_of("cloud-image", dropin=None, effective={}, users={"alice": {}})
    (a,) = step.diff(f)  # type: ignore[arg-type]
    s = apply_script(a, "sshd-0a0b", 30)
    assert "/usr/sbin/sshd -T 2>&1 | sed 's/^/@sshdt\\t0\\t/'" in s
    assert "/usr/sbin/sshd -T -C user=alice,host=10.1.2.3" in s
    assert s.index("systemctl reload") < s.index("@sshdt")
    r = parse_apply("@armed\n@applied\n@sshdt\t0\tpasswordauthentication no\n"
                    "@sshdt\t1\tpasswordauthentication yes\n")
    assert r.effective == {0: ("passwordauthentication no",), 1: ("passwordauthentication yes",)}
    assert r.message == ""
    assert "commit_rollback_now" in rollback_now_script(a, "sshd-0a0b")


def test_verify_names_the_match_block_that_wins_for_one_user(inv: Inventory) -> None:
    step = SshdStep.build(inv, inv.node("gpu1"))
    f = facts_of("match", dropin=None, effective={}, users={"alice": {}})
    (a,) = step.diff(f)  # type: ignore[arg-type]
    good = ["port 22", *(f"{k} {v}" for k, v in hardened_effective(step).items())]
    alice = [ln if not ln.startswith("passwordauthentication") else "passwordauthentication yes"
             for ln in good]
    # the files say alice's Match block opens passwords: named even when sshd -T -C agrees
    # with ours (it is asked about one connection; the block speaks for all of alice's)
    why = verify(a, ApplyResult(effective={0: tuple(good), 1: tuple(good)}), f)  # type: ignore[arg-type]
    assert why is not None and f"{D}/10-alice.conf:3 (in `Match User alice`) sets " \
        "passwordauthentication yes (a matching Match block wins over ours" in why
    plain = facts_of("cloud-image", dropin=None, effective={}, users={"alice": {}})
    (b,) = step.diff(plain)  # type: ignore[arg-type]
    assert verify(b, ApplyResult(effective={0: tuple(good), 1: tuple(good)}), plain) is None  # type: ignore[arg-type]
    why = verify(a, ApplyResult(effective={0: tuple(good), 1: tuple(alice)}), f)  # type: ignore[arg-type]
    assert why is not None and f"{SSHD_DROPIN} does not take effect" in why
    assert f"for user alice shows passwordauthentication yes, not no: {D}/10-alice.conf:3" in why
    assert "Match User alice" in why and why.count("10-alice.conf:3") == 1  # named once
    # nothing read back is a failure too, never a pass; so is sshd -T failing
    assert "said nothing" in (verify(a, ApplyResult(), f) or "")  # type: ignore[arg-type]
    broken = ("Missing privilege separation directory: /run/sshd",)
    why = verify(a, ApplyResult(effective={0: broken, 1: tuple(good)}), f) or ""  # type: ignore[arg-type]
    assert "take effect: sshd -T failed after the reload: Missing privilege separation directory: /run/sshd;" in why


def test_ours_in_place_but_sshd_t_failing_is_a_change(inv: Inventory) -> None:
    step = SshdStep.build(inv, inv.node("gpu1"))
    f = parse(answer(file_rec(SSHD_DROPIN, step.content, mode="600"), "sshdt\t/etc/ssh/sshd_config line 3: "
                     "Bad configuration option: Bogus", "sshdrc\t255"))
    (a,) = step.diff(f)
    assert "sshd -T exits 255: /etc/ssh/sshd_config line 3: Bad configuration option" in a.reasons[0]


# --- audit's view -----------------------------------------------------------------------------

def test_weaknesses_name_the_file_and_skip_what_the_hardening_allows() -> None:
    cfg = load("cloud-image")
    f = parse(answer(*[r for p, t in cfg.files.items() for r in cf(p, t)],
                     "sshdt\tpasswordauthentication yes", "sshdt\tpermitrootlogin without-password",
                     "sshdrc\t0"))
    eff = f.get(EFF)
    (w,) = E.weaknesses(eff, cfg, {"passwordauthentication": "no"})
    assert w.key == "passwordauthentication" and f"{D}/50-cloud-init.conf:1" in w.describe()
    assert E.weaknesses(eff, cfg, {"passwordauthentication": "yes"}) == []


# --- unsupported hosts ------------------------------------------------------------------------

@pytest.mark.parametrize(("system", "why"), [
    (System(os={"id": "alpine", "version_id": "3.19.1"}), "alpine 3.19.1 is not a Debian-family OS"),
    (System(os={"id": "", "version_id": ""}), "unknown (no /etc/os-release) is not a Debian-family"),
    (System(os={"id": "debian", "version_id": "12"}, caps={"systemd": False, "apt": True}),
     "systemd is not the init system"),
    (System(os={"id": "ubuntu", "version_id": "24.04"}, caps={"systemd": True, "apt": False}),
     "no apt-get/dpkg"),
])
def test_unsupported_hosts_are_refused(system: System, why: str) -> None:
    assert why in (refusal(system) or "")


@pytest.mark.parametrize("system", [
    System(),  # not probed: nothing to refuse on
    System(os={"id": "debian", "version_id": "12"}, caps={"systemd": True, "apt": True}),
    System(os={"id": "ubuntu", "version_id": "22.04"}, caps={"systemd": True, "apt": True}),
    System(os={"id": "linuxmint", "version_id": "21", "id_like": "ubuntu debian"}),
])
def test_supported_hosts_pass(system: System) -> None:
    assert refusal(system) is None


def test_the_probe_reports_os_and_capabilities() -> None:
    """The parse itself: tests/facts/system/os-and-capabilities.json."""
    f = parse(answer("os\talpine\t3.19.1\tAlpine Linux v3.19\t", "cap\tsystemd\tno", "cap\tapt\tno"))
    assert "not a Debian-family OS" in (refusal(f.get(SYSTEM)) or "")


# --- socket activation ------------------------------------------------------------------------

def _socket(active: str, listen: str) -> list[str]:
    block = unit_block("ssh.socket", active=active)
    return [*block[:-1], f"unit\tListen={listen}", block[-1]]


def test_socket_listening_where_sshd_config_says_is_fine() -> None:
    f = parse(answer("sshdt\tport 22", "sshdt\tlistenaddress [::]:22",
                     "sshdt\tlistenaddress 0.0.0.0:22", "sshdrc\t0",
                     _socket("active", "[::]:22 (Stream)")))
    sock = f.units["ssh.socket"]
    assert sock.active and sock.listen == ("[::]:22 (Stream)",)
    assert E.socket_mismatch(f.get(EFF), sock) is None
    # not socket-activated: sshd_config's ports are what sshd binds
    f = parse(answer("sshdt\tlistenaddress [::]:22", "sshdrc\t0",
                     _socket("inactive", "[::]:2222 (Stream)")))
    assert E.socket_mismatch(f.get(EFF), f.units["ssh.socket"]) is None


def test_a_port_the_socket_does_not_listen_on_is_refused(inv: Inventory) -> None:
    f = parse(answer("sshdt\tport 2222", "sshdt\tlistenaddress [::]:2222", "sshdrc\t0",
                     _socket("active", "[::]:22 (Stream)")))
    why = E.socket_mismatch(f.get(EFF), f.units["ssh.socket"]) or ""
    assert "started from ssh.socket, which listens on [::]:22" in why and "*:2222" in why
    step = SshdStep.build(inv, inv.node("gpu1"))
    with pytest.raises(Refused, match=r"ssh\.socket"):
        step.diff(f)


def test_without_a_match_block_per_user_views_are_the_global_one(inv: Inventory) -> None:
    f = parse(answer("sshdt\tpasswordauthentication no", "sshdrc\t0", "sshdcsame\talice",
                     "sshdcsame\tbob"))
    eff = f.get(EFF)
    assert eff.uniform and eff.users["alice"].get("passwordauthentication") == "no"
    step = SshdStep.build(inv, inv.node("gpu1"))
    (a,) = step.diff(f)
    assert a.checks == ("",)  # no per-user read-back either


def test_sshd_apply_restarts_instead_of_reloading_under_ssh_socket(inv: Inventory) -> None:
    step = SshdStep.build(inv, inv.node("gpu1"))
    (a,) = step.diff(facts_of("cloud-image", dropin=None, effective={}))  # type: ignore[arg-type]
    s = apply_script(a, "sshd-0a0b", 30)
    sock = s.index("if systemctl -q is-active ssh.socket; then")
    assert s.index("systemctl restart ssh.service", sock) < s.index("systemctl reload ssh.service", sock)


def test_host_text_in_messages_is_escaped() -> None:
    cfg = SC.SshdConfig({"/etc/ssh/sshd_config": "PasswordAuthentication yes\x1b[2J\u202e\n"})
    w = SC.winner(cfg, "passwordauthentication")
    assert w is not None and "\x1b" not in w.describe() and "\u202e" not in w.describe()
    assert "yes\\x1b[2J\\u202e" in w.describe()


# --- the hidden check's classes (issue 20): any name, any user, any address, Match all -----

def test_names_before_ours_aliases_and_a_later_match_all_are_named() -> None:
    cfg = load("hidden-check").with_file(SSHD_DROPIN, "KbdInteractiveAuthentication no\n"
                                                      "PermitEmptyPasswords no\n")
    # `-x.conf` and `0 cloud.conf` sort before `00-` (C order); the old spelling is the keyword
    assert where(cfg, "kbdinteractiveauthentication") == f"{D}/-x.conf:1 yes"
    assert where(cfg, "passwordauthentication", SC.Conn("alice", "10.1.2.3")) == \
        f"{D}/0 cloud.conf:2 yes"
    # a `Match all` in a later file beats our global value, for plain `sshd -T` too
    for conn in (None, SC.Conn("bob", "10.1.2.3")):
        assert where(cfg, "permitemptypasswords", conn) == f"{D}/99-late.conf:2 yes"
    # an Include inside `Match all` is still read for every connection
    assert SC.included(SC.SshdConfig({"/etc/ssh/sshd_config": f"Match all\nInclude {D}/*.conf\n"}),
                       SSHD_DROPIN)


def test_match_blocks_for_connections_nobody_probes_are_ways_in() -> None:
    cfg = load("hidden-check")
    want = {"passwordauthentication": "no", "permitrootlogin": "prohibit-password",
            "permitemptypasswords": "no", "kbdinteractiveauthentication": "no"}
    got = {(x.key, x.origin.where(), x.origin.match) for x in E.loose(cfg, want)}
    assert got == {
        ("passwordauthentication", f"{D}/0 cloud.conf:2", "Match User alice"),
        ("passwordauthentication", f"{D}/50-local.conf:4", "Match User carol"),
        ("permitrootlogin", f"{D}/50-local.conf:2", "Match Address 192.0.2.0/24"),
        ("permitemptypasswords", f"{D}/99-late.conf:2", "Match all"),
    }
    # the inventory's own hardening allowing it: not a finding
    assert not [x for x in E.loose(cfg, {**want, "permitrootlogin": "yes"})
                if x.key == "permitrootlogin"]
    # a `Match all` read first shadows every later block for that keyword
    first = cfg.with_file(f"{D}/-a.conf", "Match all\n  PasswordAuthentication no\n")
    assert not [x for x in E.loose(first, want) if x.key == "passwordauthentication"]
    # audit: each is an error-level weakness, scoped to its block
    eff = SE_parse_ok({k: SC.normal(k, v) for k, v in want.items()})
    weak = E.weaknesses(eff, cfg, want)
    assert any("for the connections its Match block matches" in w.describe()
               and "Match User carol" in w.describe() for w in weak), weak


def SE_parse_ok(settings: dict[str, str]) -> object:
    from provision.facts.sshd_effective import SshdEffective

    return SshdEffective({k: (v,) for k, v in settings.items()}, 0)


def test_plan_is_a_change_for_a_match_block_nobody_probes(inv: Inventory) -> None:
    """Ours in place, `sshd -T` and the probed users all hardened: the files still say carol
    gets in with a password, so plan is not "no changes", and apply fails (verify)."""
    step = SshdStep.build(inv, inv.node("gpu1"))
    carol = "Match User carol\n    PasswordAuthentication yes\n    AuthenticationMethods password\n"
    f = facts_of("cloud-image", dropin=step.content, effective=hardened_effective(step),
                 users={"alice": hardened_effective(step)},
                 extra=tuple(cf(f"{D}/99-local.conf", carol)))
    (a,) = step.diff(f)  # type: ignore[arg-type]
    assert a.reasons == (f"not in effect: {D}/99-local.conf:2 (in `Match User carol`) sets "
                         "passwordauthentication yes (a matching Match block wins over ours: a "
                         "way in with a password for the connections it matches)",)
    good = ["port 22", *(f"{k} {v}" for k, v in hardened_effective(step).items())]
    why = verify(a, ApplyResult(effective={i: tuple(good) for i in range(len(a.checks))}), f)  # type: ignore[arg-type]
    assert why is not None and f"{D}/99-local.conf:2 (in `Match User carol`)" in why
