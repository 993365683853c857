"""The cutover wait of `dns migrate`, proven: the switch to the new values happens only
once the old TTL has run out in every cache since the lowered TTL was served (or with
--force, then the stale window is widened to say so). The pure gate is tested at its
edges; `run_all` is driven against the local Cloud DNS server with a clock of the test's
own, so the wait is exact and takes no time: a countdown that does not really wait must
not let the switch through."""

from __future__ import annotations

from dataclasses import replace

import pytest

from provision.dns.migrate import phases
from provision.dns.migrate.journal import Journal

NAME, ZONE = "api.example.org.", "example.org."
T0 = 1_800_000_000.0


def _j(phase: str = "lowered", **kw: object) -> Journal:
    base = Journal(name=NAME, type="A", zone=ZONE, provider="clouddns",
                   original_values=("127.0.0.1",), original_ttl=300,
                   target_values=("127.0.0.2",), lower_ttl=60, phase="lowering",
                   started_at=T0)
    return replace(base, phase=phase, **kw)  # type: ignore[arg-type]


# --- the pure gate ---------------------------------------------------------------------------

def test_the_gate_opens_exactly_when_the_old_ttl_has_run_out() -> None:
    j = _j(lowered_at=T0)
    assert j.cutover_ready_at == T0 + 300
    assert phases.cutover_gate(j, T0 + 300, False) == phases.Gate(True, 0.0, "")
    assert phases.cutover_gate(j, T0 + 301, False) == phases.Gate(True, 0.0, "")
    shut = phases.cutover_gate(j, T0 + 299.5, False)
    assert not shut.ok and shut.wait == 0.5
    assert shut.message == ("api: cutover refused: caches may hold the old answer for 0 s more "
                            "(original TTL 300 s since the lowered TTL was served everywhere); "
                            "wait, or pass --force")
    early = phases.cutover_gate(j, T0, False)
    assert not early.ok and early.wait == 300 and "300 s more" in early.message


def test_force_opens_the_gate_and_says_for_how_long_caches_may_be_stale() -> None:
    g = phases.cutover_gate(_j(lowered_at=T0), T0 + 100, True)
    assert g.ok and g.wait == 200
    assert g.message == ("--force: caches may still serve the old value (127.0.0.1) for up to "
                         "200 s (they may hold it for the original TTL, 300 s, from when the "
                         "lowered TTL was served)")
    assert phases.cutover_gate(_j(lowered_at=T0), T0 + 300, True) == phases.Gate(True, 0.0, "")


@pytest.mark.parametrize("force", [False, True])
def test_never_confirmed_lowered_means_no_cutover_even_forced(force: bool) -> None:
    g = phases.cutover_gate(_j(), T0 + 10_000, force)
    assert not g.ok and g.wait == 0.0
    assert g.message == ("api: the lowered TTL was never confirmed served; run status, then "
                         "start again or rollback")


def test_the_stale_window_after_a_cutover() -> None:
    assert _j("lowered").stale_until is None
    assert _j("switched", lowered_at=T0, switched_at=T0 + 400).stale_until == T0 + 460
    # forced: the old TTL from when the lowered one was served may outlast the new one
    assert _j("switched", lowered_at=T0, switched_at=T0 + 10, forced=True).stale_until == T0 + 300
    assert _j("switched", lowered_at=T0, switched_at=T0 + 290, forced=True).stale_until == T0 + 350
    # forced with no lowering time on record: the old TTL counted from the switch
    assert _j("switched", switched_at=T0, forced=True).stale_until == T0 + 300
    assert _j("switched", switched_at=T0).stale_until == T0 + 60
    assert _j("lowered").cutover_ready_at is None


# --- verdicts and the time left (run_all against the fake: tests/integration) ----------------


def test_gate_verdicts_are_booleans_and_name_every_old_value() -> None:
    assert phases.cutover_gate(_j(), T0, False).ok is False
    assert phases.cutover_gate(_j(lowered_at=T0), T0, False).ok is False
    two = _j(lowered_at=T0, original_values=("127.0.0.1", "127.0.0.3"))
    assert "old value (127.0.0.1, 127.0.0.3) for up to" in phases.cutover_gate(two, T0, True).message


def test_served_needs_every_authoritative_answer_and_says_why_not() -> None:
    from provision.dns.propagation import Answer, Target

    auth = Target("ns1.example.org.", "127.0.0.53", "authoritative")
    res = Target("127.0.0.54", "127.0.0.54", "resolver")
    good = Answer(auth, "NOERROR", True, ("127.0.0.1", "127.0.0.3"), 60)
    assert phases.served([good, Answer(res, "SERVFAIL", False, (), None)],
                         ("127.0.0.1", "127.0.0.3"), 60) == (True, [])
    bad = [Answer(auth, "NOERROR", False, ("127.0.0.1",), 300),
           Answer(Target("ns2.example.org.", "127.0.0.55", "authoritative"), "SERVFAIL", True,
                  (), None, None, "timed out"),
           Answer(Target("ns3.example.org.", "127.0.0.56", "authoritative"), "NXDOMAIN", True,
                  (), None)]
    ok, problems = phases.served(bad, ("127.0.0.1", "127.0.0.3"), 60)
    assert ok is False
    assert problems == [
        "ns1.example.org. answers 127.0.0.1 ttl 300 (not authoritative); expected 127.0.0.1, "
        "127.0.0.3 ttl 60",
        "ns2.example.org. answers timed out ttl None; expected 127.0.0.1, 127.0.0.3 ttl 60",
        "ns3.example.org. answers NXDOMAIN ttl None; expected 127.0.0.1, 127.0.0.3 ttl 60"]


@pytest.mark.parametrize(("phase", "kw", "now", "want"), [
    ("lowering", {}, T0, ("the old TTL runs out everywhere (cutover allowed)", None)),
    ("lowered", {"lowered_at": T0}, T0 + 100,
     ("the old TTL runs out everywhere (cutover allowed)", 200.0)),
    ("lowered", {"lowered_at": T0}, T0 + 400,
     ("the old TTL runs out everywhere (cutover allowed)", 0.0)),
    ("switching", {}, T0, ("every cache has the new value", None)),
    ("switched", {"lowered_at": T0, "switched_at": T0 + 300}, T0 + 330,
     ("every cache has the new value", 30.0)),
    ("verified", {"lowered_at": T0, "switched_at": T0 + 300}, T0 + 999,
     ("every cache has the new value", 0.0)),
    ("finalizing", {}, T0, ("", None)),
])
def test_time_left_in_each_phase(phase: str, kw: dict[str, float], now: float,
                                 want: tuple[str, float | None]) -> None:
    assert phases.time_left(_j(phase, **kw), now) == want
