"""Pure tests of the commit-confirmed protocol: the rendered scripts and their answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.facts import Facts
from provision.inventory import load_inventory
from provision.inventory.model import Inventory
from provision.steps import commit as C
from provision.steps.actions import Action
from provision.steps.firewall import FirewallStep
from provision.steps.sshd import SshdStep

FIXTURE = Path(__file__).parent.parent / "fixtures" / "example.yml"
CID = "firewall-0a1b2c3d"


@pytest.fixture(scope="module")
def inv() -> Inventory:
    return load_inventory(FIXTURE)


def _one(actions: list[Action]) -> C.CommitConfirmed:
    (a,) = actions
    assert isinstance(a, C.CommitConfirmed)
    return a


@pytest.fixture(scope="module")
def fw(inv: Inventory) -> C.CommitConfirmed:
    step = FirewallStep.build(inv, inv.node("gpu1"))
    return _one(step.diff(Facts.of(uid=0, docker=True)))


@pytest.fixture(scope="module")
def sshd(inv: Inventory) -> C.CommitConfirmed:
    return _one(SshdStep.build(inv, inv.node("gpu1")).diff(Facts.of(uid=0)))


def _order(text: str, *needles: str) -> list[int]:
    pos = [text.index(n) for n in needles]
    assert pos == sorted(pos), f"out of order: {list(zip(needles, pos, strict=True))}"
    return pos


def test_firewall_apply_validates_backs_up_arms_then_installs(fw: C.CommitConfirmed) -> None:
    s = C.apply_script(fw, CID, 30)
    _order(s, "iptables-restore -w --test --noflush", "iptables-save >", "ip6tables-save >",
           "systemd-run", "mv -fT", "out=$(/usr/local/sbin/provision-firewall 2>&1)", "systemctl -q enable",
           "@applied")
    assert "--on-active=30 --timer-property=AccuracySec=100ms" in s
    assert "--unit=provision-rollback-firewall-0a1b2c3d" in s
    # every rules file is tested, each with --noflush, v4 and v6 with their own tool
    assert s.count("ip6tables-restore -w --test --noflush") == 2
    assert s.count("iptables-restore -w --test --noflush") == 2
    # the apply never flushes or deletes a chain itself: only our files, loaded --noflush
    for forbidden in ("iptables -F", "iptables -X", "-t nat", "iptables-restore <"):
        assert forbidden not in s


def test_rollback_restores_backup_and_files_and_loses_the_race_cleanly(fw: C.CommitConfirmed) -> None:
    r = C.rollback_script(fw, CID)
    _order(r, 'mv "$d/armed" "$d/rolling-back" 2>/dev/null || exit 0',
           'iptables-restore -w < "$d/old/v4.save"', 'ip6tables-restore -w < "$d/old/v6.save"',
           "systemctl daemon-reload", "restored-at", "rolled-back")
    for f in fw.files:
        assert f.write.path in r
    c = C.confirm_script(fw, CID)
    assert 'rm "$d/armed"' in c and "provision-rollback-firewall-0a1b2c3d.timer" in c


def test_sshd_apply_validates_full_config_with_candidate(sshd: C.CommitConfirmed) -> None:
    s = C.apply_script(sshd, "sshd-00ff", 12)
    _order(s, "/usr/sbin/sshd -t -f", "systemd-run", "mv -fT", "/usr/sbin/sshd -t 2>&1",
           "systemctl reload ssh.service")
    assert "--on-active=12" in s
    assert "iptables" not in s
    r = C.rollback_script(sshd, "sshd-00ff")
    assert "systemctl reload ssh.service" in r and "/etc/ssh/sshd_config.d/00-provision.conf" in r


@pytest.mark.parametrize("bad", ["", "../x", "a b", "A", "x;rm", "-x"])
def test_commit_ids_are_checked(fw: C.CommitConfirmed, bad: str) -> None:
    with pytest.raises(ValueError):
        C.apply_script(fw, bad, 30)


def test_timeout_must_be_positive(fw: C.CommitConfirmed) -> None:
    with pytest.raises(ValueError):
        C.apply_script(fw, CID, 0)


def test_parse_apply() -> None:
    ok = C.parse_apply("@armed\n@armed-at 100.5\n@applied\n")
    assert ok.armed and ok.applied and not ok.invalid and ok.armed_at == 100.5
    bad = C.parse_apply("@invalid\nsshd -t rejected: line 3: Bad configuration option: Foo\n")
    assert bad.invalid and not bad.armed and "Bad configuration option" in bad.message
    failed = C.parse_apply("@armed\n@apply-failed\nprovision-firewall failed: x\n")
    assert failed.failed and not failed.applied


def test_confirm_answers() -> None:
    assert C.confirmed("@confirmed\n") is True
    assert C.confirmed("@too-late\n") is False
    assert C.confirmed("") is None


def test_rollback_reason_is_the_recap_text() -> None:
    st = C.parse_status("@result rolled-back\n@armed-at 10.0\n@restored-at 16.5\n"
                        "@log rollback started 16.1\n@log rollback done 16.5\n")
    assert st.rollback_seconds == pytest.approx(6.5)
    assert st.fired_seconds == pytest.approx(6.1)
    text = C.rollback_reason("firewall", 30, st, "")
    assert text.startswith("firewall: confirmation over a new connection did not arrive within "
                           "30 s; previous rules restored")
    assert "6.5 s after arming" in text
    assert "previous sshd config restored" in C.rollback_reason("sshd", 8, st, "")
    assert "could not read its status" in C.rollback_reason("sshd", 8, C.Status("unknown"), "x")


def test_confirm_window_counts_from_the_last_settle_not_from_arming() -> None:
    # a slow apply (40 s between arming and settling, on a loaded host) leaves the whole
    # window: the host moved both deadlines to the settle; one second is kept back for the
    # whole seconds the host's deadline is written in
    first = C.ApplyResult(armed=True, applied=True, armed_at=100.0, applied_at=120.0,
                          settled_at=121.0)
    second = C.ApplyResult(armed=True, applied=True, armed_at=121.5, applied_at=139.0,
                           settled_at=140.0)
    assert C.confirm_window(30, [first, second]) == pytest.approx(29.0)
    # a later commit that failed after the first settled: its time after the settle counts
    failed = C.ApplyResult(armed=True, applied=False, failed=True, armed_at=121.5,
                           applied_at=None, settled_at=None)
    late = C.ApplyResult(armed=True, applied=True, failed=True, armed_at=125.0, applied_at=131.0)
    assert C.confirm_window(30, [first, failed]) == pytest.approx(29.0 - 0.5)
    assert C.confirm_window(30, [first, late]) == pytest.approx(19.0)
    assert C.confirm_window(5, [first, late]) == 0.0


def test_confirm_window_without_a_settle_counts_from_the_first_arming() -> None:
    first = C.ApplyResult(armed=True, applied=True, armed_at=100.0, applied_at=101.0)
    second = C.ApplyResult(armed=True, applied=True, armed_at=101.5, applied_at=103.0)
    assert C.confirm_window(30, [first, second]) == pytest.approx(27.0)
    assert C.confirm_window(2, [first, second]) == 0.0
    assert C.confirm_window(30, []) == 30
    parsed = C.parse_apply("@armed\n@armed-at 5.0\n@applied\n@applied-at 5.5\n")
    assert parsed.applied_at == 5.5 and parsed.settled_at is None and parsed.message == ""


def test_apply_moves_its_own_and_the_earlier_deadlines_to_its_settle(
        fw: C.CommitConfirmed) -> None:
    text = C.apply_script(fw, CID, 30, ("sshd-00aa11bb",))
    arm = text.index('echo $(($(date +%s) + 30)) > "$d/deadline"')
    timer = text.index("systemd-run --quiet")
    settle = text.index("# 8. settle")
    assert arm < timer < settle  # a deadline exists before the timer can fire
    tail = text[settle:]
    assert f'for x in "$d" {C.state_dir("sshd-00aa11bb")}; do' in tail
    assert '@settled-at' in tail and tail.index("@settled-at") > tail.index("deadline.new")
    assert C.parse_apply("@armed\n@applied\n@settled-at 140.25\n").settled_at == 140.25


def test_a_late_confirmation_that_got_through_is_reported_as_kept() -> None:
    """A confirmation connection abandoned at the deadline confirmed before the host's timer
    fired: the host kept the change, and the recap said it rolled back (seen in a 32-host
    bootstrap under load)."""
    from provision.steps.commit import Status, missed_outcome

    kept, text = missed_outcome("firewall", 30, Status("confirmed"), "1 attempt(s)")
    assert kept and "confirmed after the 30 s window" in text and "stays" in text
    kept, text = missed_outcome("firewall", 30, Status("rolled-back", 0.0, 31.0), "")
    assert not kept and "previous rules restored by the host 31.0 s after arming" in text
    kept, _ = missed_outcome("sshd", 30, Status("pending"), "")
    assert not kept
