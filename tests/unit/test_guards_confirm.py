"""The shell layer of commit-confirmed (provision.hosts.confirm), proven without a host:
the session is a stand-in that answers with what the host's scripts print, and the
confirmation's new connection (`_fresh_exec`) is replaced by a function that plays the
host's side. What these prove is the decision made on those answers: a change counts as
kept only when a confirmation over a new connection got through (or the host says it
did), never because the apply returned; a missed one is reported as rolled back, with the
host's own account. The real round trip runs in the lab (tests/lab/test_harden.py)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from provision.hosts import confirm as K
from provision.hosts.converge import HostRun
from provision.inventory import load_inventory
from provision.inventory.model import Inventory
from provision.steps import commit as C
from provision.steps.actions import WriteFile

FIXTURE = Path(__file__).parent.parent / "fixtures" / "example.yml"


@pytest.fixture(scope="module")
def inv() -> Inventory:
    return load_inventory(FIXTURE)


@dataclass
class Out:
    stdout: str
    status: int = 0
    stderr: str = ""


@dataclass
class Session:
    """The run's existing session: answers each exec in turn, records the scripts."""

    answers: list[Out | BaseException]
    scripts: list[str] = field(default_factory=list)
    timeouts: list[float | None] = field(default_factory=list)
    execs: int = 0

    def sh(self, script: str, timeout: float | None = None,
           on_line: Callable[[str], None] | None = None) -> Out:
        self.scripts.append(script)
        self.timeouts.append(timeout)
        self.execs += 1
        answer = self.answers.pop(0) if self.answers else Out("", 1, "no answer")
        if isinstance(answer, BaseException):
            raise answer
        if on_line is not None:  # as Remote.sh: each stdout line as it arrives
            for line in answer.stdout.splitlines():
                on_line(line)
        return answer


@dataclass
class Fresh:
    """The confirmation's new connections: each call takes the next answer."""

    answers: list[str | BaseException]
    scripts: list[str] = field(default_factory=list)
    calls: list[tuple[Any, Any, bool, float]] = field(default_factory=list)

    def __call__(self, inv: Any, run: Any, accept_new: bool, script: str, timeout: float,
                 phase: Any = None) -> str:
        self.scripts.append(script)
        self.calls.append((inv, run, accept_new, timeout))
        answer = self.answers.pop(0) if self.answers else ConnectionError("refused")
        if isinstance(answer, BaseException):
            raise answer
        return answer


# what each commit installs, and what the apply's read-back after applying shows when it
# takes effect (`sshd -T`; `iptables-save -t filter`): provision.steps.verify accepts these
DROPIN = "PasswordAuthentication no\n"
RULES = ("*filter\n:PROVISION-INPUT - [0:0]\n-F PROVISION-INPUT\n"
         "-A PROVISION-INPUT -p tcp -m tcp --dport 22 -j ACCEPT\n-A PROVISION-INPUT -j DROP\nCOMMIT\n")
LIVE = ("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
        ":PROVISION-INPUT - [0:0]\n-A INPUT -j PROVISION-INPUT\n"
        "-A PROVISION-INPUT -p tcp -m tcp --dport 22 -j ACCEPT\n-A PROVISION-INPUT -j DROP\nCOMMIT\n")
READ_BACK = {"sshd": "@sshdt\t0\tport 22\n@sshdt\t0\tpasswordauthentication no\n",
             "firewall": "".join(f"@ipt4\t{ln}\n" for ln in LIVE.splitlines())}


def _commit(kind: C.Kind) -> C.CommitConfirmed:
    path = "/etc/ssh/sshd_config.d/50-provision.conf" if kind == "sshd" else "/etc/iptables/rules.v4"
    staged = C.Staged(WriteFile(path, DROPIN if kind == "sshd" else RULES),
                      "sshd" if kind == "sshd" else "iptables-v4")
    return C.CommitConfirmed(kind, "gpu1", (staged,),
                             "ssh.service" if kind == "sshd" else "provision-firewall.service",
                             script="/usr/local/sbin/provision-firewall" if kind == "firewall" else "")


def _run(inv: Inventory, session: Session, *kinds: C.Kind) -> HostRun:
    run = HostRun(inv.node("gpu1"))
    run.actions = [(k, _commit(k)) for k in kinds]
    run.remote = session
    return run


def _applied(*parts: str) -> Out:
    return Out("".join(f"@commit\t{i}\n{p}" for i, p in enumerate(parts)))


ARMED = "@armed\n@armed-at 100.0\n@applied\n@applied-at 100.5\n"


def ok(kind: C.Kind) -> str:
    """An apply that armed, applied, and whose read-back shows the change in effect."""
    return ARMED + READ_BACK[kind]


ROLLED = "@result rolled-back\n@armed-at 100.0\n@restored-at 106.0\n@log rollback started 105.9\n"


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "RETRY_PAUSE", 0.01)


def test_kept_only_after_a_confirmation_over_a_new_connection(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = Fresh([ConnectionError("booting"), "@commit\t0\n@confirmed\n"])
    monkeypatch.setattr(K, "_fresh_exec", fresh)
    session = Session([_applied(ok("sshd"))])
    run = K.execute_guarded(inv, _run(inv, session, "sshd"), False, 30)
    assert (run.status, run.done, run.error) == ("changed", 1, "")
    assert len(fresh.scripts) == 2, "retried after the failed connection"
    assert "provision commit-confirmed confirm: sshd" in fresh.scripts[-1]
    assert len(session.scripts) == 1 and "commit-confirmed apply: sshd" in session.scripts[0]
    assert run.remote_execs == 2  # the apply on the session + one confirmation


@pytest.mark.parametrize("answer", ["@commit\t0\n@too-late\n", "@commit\t0\n", "", "garbage"])
def test_no_confirmation_means_rolled_back_with_the_hosts_account(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    monkeypatch.setattr(K, "_fresh_exec", Fresh([answer]))
    session = Session([_applied(ok("sshd")), Out("@commit\t0\n" + ROLLED)])
    run = K.execute_guarded(inv, _run(inv, session, "sshd"), False, 30)
    assert run.status == "failed" and run.done == 0
    assert run.error.startswith("sshd: confirmation over a new connection did not arrive "
                                "within 30 s; previous sshd config restored by the host 6.0 s "
                                "after arming (timer fired at 5.9 s)")
    assert run.failed_action == _commit("sshd").describe()
    assert "commit-confirmed status: sshd" in session.scripts[1]


def test_a_late_confirmation_the_host_took_is_kept(inv: Inventory,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "_fresh_exec", Fresh(["@commit\t0\n"]))
    session = Session([_applied(ok("firewall")), Out("@commit\t0\n@result confirmed\n")])
    run = K.execute_guarded(inv, _run(inv, session, "firewall"), False, 30)
    assert run.status == "changed" and run.done == 1 and run.error == ""
    assert "confirmed after the 30 s window" in run.note


def test_the_deadline_is_the_hosts_window_and_every_attempt_is_counted(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = Fresh([ConnectionError("refused")] * 10_000)
    monkeypatch.setattr(K, "_fresh_exec", fresh)
    # the host says 0.5 s of a 1 s timeout went by between arming and applying
    session = Session([_applied(ok("sshd")), Out("@commit\t0\n@result pending\n")])
    run = K.execute_guarded(inv, _run(inv, session, "sshd"), False, 1)
    assert run.status == "failed"
    assert "the host has not rolled back yet (still armed)" in run.error
    assert f"({len(fresh.scripts)} attempt(s), last: " in run.error
    assert "refused" in run.error


def test_invalid_unarmed_or_failed_applies_never_ask_for_a_confirmation(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    for part, want in (("@invalid\nsshd -t: bad option\n", "sshd: rejected on the host, nothing "
                        "changed: sshd -t: bad option"),
                       ("cannot run systemd-run\n", "sshd: could not arm the rollback, nothing "
                        "changed (exit 0): cannot run systemd-run"),
                       ("@armed\n@apply-failed\nreload failed\n", "sshd: apply failed, previous "
                        "state restored at once: reload failed"),
                       ("@armed\n", "sshd: apply failed, previous state restored at once: ")):
        fresh = Fresh([])
        monkeypatch.setattr(K, "_fresh_exec", fresh)
        run = K.execute_guarded(inv, _run(inv, Session([_applied(part)]), "sshd"), False, 30)
        assert run.status == "failed" and run.error == want, part
        assert fresh.scripts == [], f"asked for a confirmation after {part!r}"
        assert run.failed_action == _commit("sshd").describe()


def test_a_later_commit_that_failed_does_not_hide_the_earlier_ones_confirmation(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = Fresh(["@commit\t0\n@confirmed\n"])
    monkeypatch.setattr(K, "_fresh_exec", fresh)
    session = Session([_applied(ok("firewall"), "@invalid\nbad rules\n")])
    run = K.execute_guarded(inv, _run(inv, session, "firewall", "sshd"), False, 30)
    assert run.status == "failed" and run.done == 1
    assert run.error == "sshd: rejected on the host, nothing changed: bad rules"
    assert fresh.scripts[0].count("provision commit-confirmed confirm:") == 1


def test_a_run_cut_short_names_the_commits_not_applied(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "_fresh_exec", Fresh([]))
    session = Session([Out("", 255, "Connection reset\n")])
    run = K.execute_guarded(inv, _run(inv, session, "firewall", "sshd"), False, 30)
    assert run.status == "failed"
    assert run.error == ("firewall: not applied (the run stopped before it, exit 255: "
                         "Connection reset)")
    session = Session([Out("", 1, "")])
    run = K.execute_guarded(inv, _run(inv, session, "sshd"), False, 30)
    assert run.error == "sshd: not applied (the run stopped before it, exit 1)"


def test_two_armed_commits_one_answer_each(inv: Inventory,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "_fresh_exec", Fresh(["@commit\t0\n@confirmed\n@commit\t1\n@too-late\n"]))
    session = Session([_applied(ok("firewall"), ok("sshd")), Out("@commit\t0\n" + ROLLED)])
    run = K.execute_guarded(inv, _run(inv, session, "firewall", "sshd"), False, 30)
    assert run.status == "failed" and run.done == 1
    assert run.error.startswith("sshd: confirmation over a new connection")
    assert session.scripts[1].count("provision commit-confirmed status:") == 1
    assert "status: sshd" in session.scripts[1]


def test_an_error_in_the_apply_exec_is_a_failure_that_says_the_host_rolls_back(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "_fresh_exec", Fresh([]))
    run = K.execute_guarded(inv, _run(inv, Session([OSError("socket closed")]), "sshd"), False, 30)
    assert run.status == "failed"
    assert run.error.endswith("; a firewall/sshd change armed before this rolls back on the host "
                              "by itself")
    assert "socket closed" in run.error and run.remote_execs == 1


def test_a_run_that_is_not_pending_is_left_alone(inv: Inventory) -> None:
    run = _run(inv, Session([]), "sshd")
    run.status = "failed"
    assert K.execute_guarded(inv, run, False, 30) is run and run.remote.execs == 0


# --- confirm(): the attempts until the deadline ----------------------------------------------

def test_confirm_past_the_deadline_tries_nothing(inv: Inventory,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = Fresh(["@commit\t0\n@confirmed\n"])
    monkeypatch.setattr(K, "_fresh_exec", fresh)
    got = K.confirm(inv, _run(inv, Session([]), "sshd"), False, "s", 2, K.time.monotonic() - 1)
    assert got.answers == [None, None]
    assert got.cause == "no time left to try: the window was 0.0 s when the apply returned"
    assert fresh.scripts == []


def test_confirm_gives_up_on_an_attempt_still_hanging_at_the_deadline(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    calls: list[float] = []

    def hanging(*args: Any) -> str:
        calls.append(args[4])  # the seconds left, given to the attempt
        if len(calls) == 1:
            raise ConnectionError("no route")
        args[5].enter("logging in to gpu1 through jump")
        release.wait()
        return "@commit\t0\n@confirmed\n"

    monkeypatch.setattr(K, "_fresh_exec", hanging)
    try:
        got = K.confirm(inv, _run(inv, Session([]), "sshd"), False, "s", 1,
                        K.time.monotonic() + 0.3)
    finally:
        release.set()
    assert got.answers == [None]
    assert re.fullmatch(r"2 attempt\(s\) in 0\.\d s, the last one still logging in to gpu1 "
                        r"through jump for 0\.\d s at the deadline; before it: no route",
                        got.cause), got.cause
    assert all(0 < left <= 0.3 for left in calls), "each attempt gets only the time left"


def test_confirm_pads_missing_answers(inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "_fresh_exec", Fresh(["@commit\t0\n@confirmed\n"]))
    got = K.confirm(inv, _run(inv, Session([]), "sshd"), False, "s", 2, K.time.monotonic() + 30)
    assert got.answers == [True, None] and got.cause == "confirm script: no answer"
    monkeypatch.setattr(K, "_fresh_exec", Fresh(["@commit\t0\n@confirmed\n@commit\t1\n@confirmed\n"
                                                 "@commit\t2\n@confirmed\n"]))
    got = K.confirm(inv, _run(inv, Session([]), "sshd"), False, "s", 2, K.time.monotonic() + 30)
    assert got.answers == [True, True] and got.cause == ""


# --- _status(): the host's account, over the session or a fresh connection --------------------

def test_status_falls_back_to_a_fresh_connection_then_to_unknown(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = Fresh(["@commit\t0\n@result rolled-back\n"])
    monkeypatch.setattr(K, "_fresh_exec", fresh)
    run = _run(inv, Session([Out("", 255, "gone")]), "sshd")
    assert [s.result for s in K._status(inv, run, False, "s", 2)] == ["rolled-back", "unknown"]
    assert fresh.scripts == ["s"]
    monkeypatch.setattr(K, "_fresh_exec", Fresh([ConnectionError("x")]))
    run = _run(inv, Session([OSError("closed")]), "sshd")
    assert [s.result for s in K._status(inv, run, False, "s", 1)] == ["unknown"]
    run = _run(inv, Session([Out("@commit\t0\n@result pending\n")]), "sshd")
    assert [s.result for s in K._status(inv, run, False, "s", 1)] == ["pending"]


def test_bounded_returns_results_errors_and_abandons_hangs() -> None:
    assert K._bounded(lambda: 7, 5) == (True, 7, None)
    err = ValueError("x")

    def boom() -> None:
        raise err

    assert K._bounded(boom, 5) == (True, None, err)
    gate = threading.Event()
    try:
        assert K._bounded(gate.wait, 0.05) == (False, None, None)
    finally:
        gate.set()
    assert K._bounded(lambda: 1, -3) in ((True, 1, None), (False, None, None))


def test_tail_keeps_the_last_three_lines() -> None:
    assert K._tail("a\nb\nc\nd\n") == "b / c / d"
    assert K._tail("  \n") == ""


def test_the_window_is_what_the_host_clock_left_of_the_timeout(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host armed its timer 31 s before the apply ended (a 30 s timeout): it is already
    rolling back, and a confirmation that would get through now must not be counted."""
    fresh = Fresh(["@commit\t0\n@confirmed\n"])
    monkeypatch.setattr(K, "_fresh_exec", fresh)
    late = "@armed\n@armed-at 100.0\n@applied\n@applied-at 131.0\n" + READ_BACK["sshd"]
    session = Session([_applied(late), Out("@commit\t0\n" + ROLLED)])
    run = K.execute_guarded(inv, _run(inv, session, "sshd"), False, 30)
    assert fresh.scripts == []
    assert run.status == "failed"
    assert run.error.endswith("(no time left to try: the window was 0.0 s when the apply returned)")


def test_a_slow_apply_that_settled_leaves_the_whole_window(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same 31 s between arming and the end, but the host moved its deadline when the
    apply settled: the confirmation is tried, and confirms."""
    fresh = Fresh(["@commit\t0\n@confirmed\n"])
    monkeypatch.setattr(K, "_fresh_exec", fresh)
    late = ("@armed\n@armed-at 100.0\n@applied\n@applied-at 131.0\n" + READ_BACK["sshd"]
            + "@settled-at 131.2\n")
    run = K.execute_guarded(inv, _run(inv, Session([_applied(late)]), "sshd"), False, 30)
    assert len(fresh.scripts) == 1
    assert run.status == "changed", run.error


# --- what is handed on: the inventory, the run, accept-new, the scripts, the bounds ------------

def test_every_connection_gets_the_inventory_the_run_and_accept_new(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = Fresh(["@commit\t0\n@too-late\n", "@commit\t0\n@result rolled-back\n"])
    monkeypatch.setattr(K, "_fresh_exec", fresh)
    session = Session([_applied(ok("sshd")), Out("", 255, "session gone")])
    run = _run(inv, session, "sshd")
    run.seconds = 5.0
    K.execute_guarded(inv, run, True, 30)
    assert [c[:3] for c in fresh.calls] == [(inv, run, True), (inv, run, True)]
    assert 0 < fresh.calls[0][3] <= 29.5                  # the confirmation: what is left
    assert fresh.calls[1][3] == K.STATUS_GRACE * 1 + 10    # the status over a fresh connection
    assert session.timeouts == [K.APPLY_TIMEOUT, K.STATUS_GRACE * 1 + 10]
    assert run.seconds >= 5.0 and run.seconds < 1e6, "time is added to the run's, not replaced"
    # the three scripts: apply stops at the first failure, confirm and status run every part
    apply, status = session.scripts
    assert "# provision: apply (1 part(s))" in apply and apply.count("|| exit $?") == 1
    assert "# provision: confirm (1 part(s))" in fresh.scripts[0]
    assert "|| exit $?" not in fresh.scripts[0]
    assert "# provision: status (1 part(s))" in status and "|| exit $?" not in status
    assert "-lt 150 ]" in status  # waits up to STATUS_GRACE for the host's rollback
    (cid,) = set(re.findall(r"provision-rollback-(sshd-[0-9a-f]+)", apply))
    assert re.fullmatch(r"sshd-[0-9a-f]{8}", cid) and cid in fresh.scripts[0] and cid in status


def test_the_status_waits_are_bounded(inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    bounds: list[float] = []
    real = K._bounded

    def bounded(fn: Any, timeout: float) -> Any:
        bounds.append(timeout)
        return real(fn, timeout)

    monkeypatch.setattr(K, "_bounded", bounded)
    monkeypatch.setattr(K, "_fresh_exec", Fresh(["@commit\t0\n@result pending\n"]))
    K._status(inv, _run(inv, Session([Out("", 1)]), "sshd"), False, "s", 2)
    assert bounds == [K.STATUS_GRACE * 2 + 12, K.STATUS_GRACE * 2 + 25]


def test_plain_actions_run_first_in_the_same_exec(inv: Inventory,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "_fresh_exec", Fresh(["@commit\t0\n@confirmed\n"]))
    write = WriteFile("/etc/motd", "hi\n")
    session = Session([Out("@step\t0\n@done\n@commit\t0\n" + ok("sshd"))])
    run = _run(inv, session, "sshd")
    run.actions.insert(0, ("files", write))
    K.execute_guarded(inv, run, False, 30)
    assert run.status == "changed" and run.done == 2
    assert session.timeouts == [None], "a batch (apt) has no time limit"
    assert "/etc/motd" in session.scripts[0] and "|| exit $?" in session.scripts[0]
    assert session.scripts[0].index("/etc/motd") < session.scripts[0].index("@commit")


def test_a_failed_plain_batch_stops_before_any_commit(inv: Inventory,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = Fresh([])
    monkeypatch.setattr(K, "_fresh_exec", fresh)
    write = WriteFile("/etc/motd", "hi\n")
    session = Session([Out("@step\t0\n", 7, "disk full\n")])
    run = _run(inv, session, "sshd")
    run.actions.insert(0, ("files", write))
    K.execute_guarded(inv, run, False, 30)
    assert run.status == "failed" and run.done == 0 and fresh.scripts == []
    assert run.failed_action == write.describe()
    assert run.error == f"{write.describe()} failed (exit 7): disk full"


def test_without_commits_it_is_the_plain_execute(inv: Inventory) -> None:
    session = Session([Out("@step\t0\n@done\n")])
    run = HostRun(inv.node("gpu1"))
    run.actions = [("files", WriteFile("/etc/motd", "hi\n"))]
    run.remote = session
    assert K.execute_guarded(inv, run, False, 30).status == "changed"
    assert "commit-confirmed" not in session.scripts[0]


def test_problems_and_notes_are_joined(inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "_fresh_exec", Fresh(["@commit\t0\n"]))
    session = Session([_applied(ok("firewall"), "@invalid\nbad\n"), Out("@commit\t0\n" + ROLLED)])
    run = K.execute_guarded(inv, _run(inv, session, "firewall", "sshd"), False, 30)
    rolled, invalid = run.error.split("; sshd: ")
    assert rolled.startswith("firewall: confirmation over a new connection")
    assert invalid == "rejected on the host, nothing changed: bad"
    monkeypatch.setattr(K, "_fresh_exec", Fresh(["@commit\t0\n"]))
    session = Session([_applied(ok("sshd")), Out("@commit\t0\n@result confirmed\n")])
    run = _run(inv, session, "sshd")
    run.note = "booting, retried 2×"
    K.execute_guarded(inv, run, False, 30)
    assert run.note.startswith("booting, retried 2×; sshd: confirmed after the 30 s window")


def test_an_unarmed_commit_without_a_message_says_what_the_host_wrote(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "_fresh_exec", Fresh([]))
    session = Session([Out("@commit\t0\n", 4, "a\nb\nsystemd-run: not found\n")])
    run = K.execute_guarded(inv, _run(inv, session, "sshd"), False, 30)
    assert run.error == ("sshd: could not arm the rollback, nothing changed (exit 4): a / b / "
                         "systemd-run: not found")


def test_confirm_reports_its_duration(inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    for answers in ([], ["@commit\t0\n@confirmed\n"]):
        monkeypatch.setattr(K, "_fresh_exec", Fresh(list(answers)))
        got = K.confirm(inv, _run(inv, Session([]), "sshd"), False, "s", 1,
                        K.time.monotonic() + (0.05 if not answers else 30))
        assert 0 <= got.seconds < 1e6


def test_an_abandoned_attempt_never_holds_the_process(inv: Inventory) -> None:
    gate = threading.Event()
    try:
        assert K._bounded(gate.wait, 0.01) == (False, None, None)
        hung = [t for t in threading.enumerate() if t is not threading.current_thread()
                and t.is_alive() and not t.name.startswith(("pytest", "MainThread"))]
        assert hung and all(t.daemon for t in hung)
    finally:
        gate.set()


def test_fresh_exec_opens_a_new_chain_through_the_runs_hops_and_closes_it(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class Chain:
        closed = False

        def close(self) -> None:
            Chain.closed = True

    phase = K.Phase()

    def connect(inv_: Any, host: Any, accept_new: bool, gateways: Any) -> Chain:
        seen.update(inv=inv_, host=host, accept_new=accept_new, gateways=gateways,
                    phase_at_connect=phase.what)
        return Chain()

    class Remote:
        def __init__(self, chain: Any) -> None:
            seen["chain"] = chain

        def sh(self, script: str, timeout: float) -> Out:
            seen.update(script=script, timeout=timeout, phase_at_exec=phase.what)
            return Out("@confirmed\n")

    monkeypatch.setattr(K, "connect", connect)
    monkeypatch.setattr(K, "Remote", Remote)
    run = _run(inv, Session([]), "sshd")
    run.gateways = object()  # type: ignore[assignment]
    assert K._fresh_exec(inv, run, True, "the script", 12.5, phase) == "@confirmed\n"
    # the recap of a miss says where the attempt was: logging in (through which hops) or running
    assert seen["phase_at_connect"] == "logging in to gpu1 through jump"
    assert seen["phase_at_exec"] == "running the confirm script"
    assert seen["inv"] is inv and seen["host"] is run.host and seen["accept_new"] is True
    assert seen["gateways"] is run.gateways and isinstance(seen["chain"], Chain)
    assert (seen["script"], seen["timeout"]) == ("the script", 12.5) and Chain.closed


def test_durations_are_the_time_spent_inside(inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a run and a confirmation report as their duration lies within what the test saw
    pass around the call (no assumption about how fast anything is)."""
    for answers, deadline in (([], -1.0), (["@commit\t0\n@confirmed\n"], 30.0),
                              ([ConnectionError("x")] * 10_000, 0.05)):
        monkeypatch.setattr(K, "_fresh_exec", Fresh(list(answers)))
        before = K.time.monotonic()
        got = K.confirm(inv, _run(inv, Session([]), "sshd"), False, "s", 1, before + deadline)
        after = K.time.monotonic()
        assert 0 < got.seconds <= after - before
    monkeypatch.setattr(K, "_fresh_exec", Fresh(["@commit\t0\n@confirmed\n"]))
    run = _run(inv, Session([_applied(ok("sshd"))]), "sshd")
    run.seconds = 5.0
    before = K.time.monotonic()
    K.execute_guarded(inv, run, False, 30)
    assert 5.0 < run.seconds <= 5.0 + (K.time.monotonic() - before)


def test_a_single_attempt_still_hanging_has_nothing_before_it(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()

    def hanging(*args: Any) -> str:
        args[5].enter("running the confirm script")
        release.wait()
        return ""

    monkeypatch.setattr(K, "_fresh_exec", hanging)
    try:
        got = K.confirm(inv, _run(inv, Session([]), "sshd"), False, "s", 1,
                        K.time.monotonic() + 0.2)
    finally:
        release.set()
    assert re.fullmatch(r"1 attempt\(s\) in 0\.\d s, the last one still running the confirm "
                        r"script for 0\.\d s at the deadline", got.cause), got.cause


def test_status_timeouts_grow_with_the_number_of_commits(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = Fresh(["@commit\t0\n@result pending\n@commit\t1\n@result pending\n"])
    monkeypatch.setattr(K, "_fresh_exec", fresh)
    session = Session([Out("", 1)])
    K._status(inv, _run(inv, session, "sshd"), False, "s", 2)
    assert session.timeouts == [K.STATUS_GRACE * 2 + 10]
    assert fresh.calls[0][3] == K.STATUS_GRACE * 2 + 10


def test_the_duration_of_a_confirmation_given_up_on_a_hanging_attempt(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    monkeypatch.setattr(K, "_fresh_exec", lambda *a: release.wait() and "")
    before = K.time.monotonic()
    try:
        got = K.confirm(inv, _run(inv, Session([]), "sshd"), False, "s", 1, before + 0.1)
    finally:
        release.set()
    assert 0 < got.seconds <= K.time.monotonic() - before and got.answers == [None]


# --- the read-back after applying (provision.steps.verify): not in effect, never confirmed ---

@pytest.mark.parametrize("read_back, status, why, done", [
    ("@sshdt\t0\tport 22\n@sshdt\t0\tpasswordauthentication yes\n", "rolled-back",
     "sshd -T shows passwordauthentication yes, not no (no file sets it: an sshd default, or "
     "a file we could not read)", "rolled back at once"),
    ("", "pending", "sshd -T said nothing after the reload",
     "the host rolls it back by its timer (status: pending)"),
])
def test_a_change_not_in_effect_is_never_confirmed_and_is_rolled_back_at_once(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch, read_back: str, status: str, why: str,
        done: str) -> None:
    """An apply that returned, armed and applied is still not kept when the host's own
    read-back does not show the change: no confirmation is sent (it would keep it), the
    rollback runs now over the session, and the error names the cause and what the host did."""
    fresh = Fresh(["@commit\t0\n@confirmed\n"])
    monkeypatch.setattr(K, "_fresh_exec", fresh)
    session = Session([_applied(ARMED + read_back), Out(f"@commit\t0\n@result {status}\n")])
    run = K.execute_guarded(inv, _run(inv, session, "sshd"), False, 30)
    assert fresh.scripts == [], "asked for a confirmation of a change not in effect"
    assert run.status == "failed" and run.done == 0
    assert run.error == (f"sshd: /etc/ssh/sshd_config.d/50-provision.conf does not take effect: "
                         f"{why}; {done}")
    assert run.failed_action == _commit("sshd").describe()
    assert "provision commit-confirmed rollback now: sshd" in session.scripts[1]
    assert run.remote_execs == 2


def test_only_the_commits_in_effect_are_confirmed(inv: Inventory,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = Fresh(["@commit\t0\n@confirmed\n"])
    monkeypatch.setattr(K, "_fresh_exec", fresh)
    session = Session([_applied(ARMED, ok("sshd")), Out("@commit\t0\n@result rolled-back\n")])
    run = K.execute_guarded(inv, _run(inv, session, "firewall", "sshd"), False, 30)
    assert run.status == "failed" and run.done == 1
    assert run.error == ("firewall: the loaded rules do not take effect: iptables-save said "
                         "nothing; rolled back at once")
    assert run.failed_action == _commit("firewall").describe()
    (script,) = fresh.scripts
    assert "confirm: sshd" in script and "confirm: firewall" not in script
    assert "rollback now: firewall" in session.scripts[1]
    assert "rollback now: sshd" not in session.scripts[1]


# --- the host lock (provision.hosts.lock): the apply runs only while this run holds it ----------

@dataclass
class Held:
    token: str = "0123456789abcdef"


def test_the_apply_runs_under_the_lock_guard_and_a_lost_lock_applies_nothing(
        inv: Inventory, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = Fresh(["@commit\t0\n@confirmed\n"])
    monkeypatch.setattr(K, "_fresh_exec", fresh)
    lost = "provision: this run no longer holds the host lock (its heartbeat was lost): nothing done\n"
    session = Session([Out("", 75, lost)])
    run = _run(inv, session, "sshd")
    run.lock = Held()  # type: ignore[assignment]
    K.execute_guarded(inv, run, False, 30)
    (apply,) = session.scripts
    assert apply.index("provision_guard\n") < apply.index("commit-confirmed apply: sshd")
    assert "0123456789abcdef" in apply
    assert fresh.scripts == [] and run.status == "failed" and run.done == 0
    assert run.error.startswith("sshd: not applied (the run stopped before it, exit 75: "
                                "provision: this run no longer holds the host lock")
