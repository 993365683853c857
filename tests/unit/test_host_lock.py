"""The host lock's decisions (provision/hosts/lock.py): the holder record and the lock lines
are host output, parsed as hostile text; wait-die; staleness; the messages. The last tests
run the rendered lock script with a real `sh` and `flock` against a temporary directory
(the paths moved there), so the shell side's states are proved too, without a lab."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from provision.hosts import lock as L

TOKEN_A = "0190000000000aaaaaaaaaaaa"
TOKEN_B = "0190000000001bbbbbbbbbbbb"
SINCE = 1796126465  # 2026-12-01 12:01:05 UTC


def record(by: str = "alice@laptop", command: str = "apply", since: str = str(SINCE),
           token: str = TOKEN_A, pid: str = "4242", state: str = "held", ended: str = "-") -> str:
    return "\t".join(["provision-lock", "1", by, command, since, token, pid, state, ended])


# --- the holder record -------------------------------------------------------------------

@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


def test_a_record_we_wrote_parses() -> None:
    h = L.parse_holder(record())
    assert h == L.Holder("alice@laptop", "apply", SINCE, TOKEN_A, 4242, "held", None)
    assert L.parse_holder(record(state="closed", ended=str(SINCE + 9))) == L.Holder(
        "alice@laptop", "apply", SINCE, TOKEN_A, 4242, "closed", SINCE + 9)


@pytest.mark.parametrize("text", [
    record(by="alice@lap\x1b[31mtop"),            # escape sequence in who
    record(by="alice@laptop\u202e"),               # bidi override
    record(by="alice"),                            # no @host
    record(by="a" * 65 + "@laptop"),               # longer than a name may be
    record(command="apply; rm -rf /"),
    record(since="12:01:05"),
    record(since="9" * 13),
    record(token="NOT-HEX-TOKEN-AT-ALL"),
    record(pid="-1"),
    record(state="mine"),
    record(state="held", ended=str(SINCE)),       # held cannot have ended
    record(state="closed", ended="-"),            # ended without a time
    record().replace("provision-lock\t1", "provision-lock\t2"),
    record() + "\textra",
    record() + "\n" + record(),                    # two lines
    record(by="alice@" + "l" * 60) + "\t" * 0 + "x" * 600,  # over the size cap
    "",
    "garbage",
])
def test_anything_else_is_unreadable(text: str) -> None:
    assert L.parse_holder(text) is None


# --- the lock lines ----------------------------------------------------------------------

def test_a_wait_then_takeover_is_reported_in_order() -> None:
    out = "\n".join([
        f"lock\tbusy\t{record()}",
        f"lock\tstale\t{record(state='closed', ended=str(SINCE + 30))}",
        "lock\texecs",
        "lock\tarmed\tsshd-0a1b2c3d\t1796126470.25",
        "lock\tacquired\t42\t1796126507.5",
        "probe\t1", "id\t0", "end", ""])
    lines, answer = L.split(out)
    assert answer.startswith("probe\t1\n") and answer.endswith("end\n")
    r = L.parse(lines)
    assert isinstance(r.busy, L.Holder) and r.busy.by == "alice@laptop"
    assert isinstance(r.stale, L.Holder) and r.stale.state == "closed"
    assert r.execs and r.acquired and r.waited == 42 and r.malformed == 0
    assert r.acquired_at == 1796126507.5
    assert r.armed == [L.Armed("sshd-0a1b2c3d", 1796126470.25)]
    assert r.armed[0].kind == "sshd"
    assert L.failure(r, 180, SINCE + 60) is None


@pytest.mark.parametrize("line", [
    "lock\tacquired\tlots\t1",
    "lock\tacquired\t1",
    "lock\tcontended\tx",
    "lock\tarmed\t../../etc\t1",
    "lock\tarmed\tsshd-1\t1; reboot",
    "lock\ttimeout\tforever",
    "lock\tsomething-new\tx",
    "lock\texecs\tmore",
    "lock\t" + "x" * 2000,
    "lock",
])
def test_a_line_we_do_not_know_is_counted_and_never_trusted(line: str) -> None:
    r = L.parse([line])
    assert r.malformed == 1
    assert not r.acquired and not r.armed and r.timeout == ""


def test_an_unreadable_holder_is_said_so_not_printed() -> None:
    r = L.parse([f"lock\tbusy\t{record(by='mallory@x')}\x1b]0;pwned\x07"])
    assert r.busy == L.UNREADABLE
    text = L.event_text(r, "busy", SINCE)
    assert text == "waiting for a run whose lock record is unreadable"


def test_too_many_lines_are_cut_off() -> None:
    lines = [f"lock\tarmed\tsshd-{i:08x}\t1" for i in range(L.LINES_MAX + 20)]
    r = L.parse(lines)
    assert len(r.armed) == L.LINES_MAX and r.malformed == 20


# --- decisions ---------------------------------------------------------------------------

def test_wait_die_the_younger_run_yields() -> None:
    a = L.new_token(1000.0, "ffffffff")  # started first
    b = L.new_token(1000.5, "00000000")
    assert a < b
    older, younger = L.parse_holder(record(token=a)), L.parse_holder(record(token=b))
    assert L.must_yield(b, older) is True      # younger waiting for older: hold nothing
    assert L.must_yield(a, younger) is False   # older may wait, holding
    assert L.must_yield(a, None) is True and L.must_yield(a, L.UNREADABLE) is True


def test_the_token_orders_by_start_time_and_refuses_bad_randomness() -> None:
    assert L.new_token(1.0, "abcdef12") < L.new_token(2.0, "00000000")
    with pytest.raises(ValueError):
        L.new_token(1.0, "xyz")


@pytest.mark.parametrize("state,ended,why", [
    ("closed", str(SINCE + 40), "its SSH session ended at 12:01:45 without releasing it"),
    ("silent", str(SINCE + 70), f"its heartbeat stopped (no byte for {L.LIFELINE} s) at 12:02:15"),
    ("held", "-", "its process on the host died without releasing it (killed, or the host "
                  "restarted)"),
])
def test_staleness_says_what_became_of_the_holder(state: str, ended: str, why: str) -> None:
    h = L.parse_holder(record(state=state, ended=ended))
    assert h is not None
    assert L.took_over(h, SINCE + 100) == (
        f"took over a stale lock from apply by alice@laptop since 12:01:05: {why}")


# --- messages ----------------------------------------------------------------------------

def test_the_waiting_line() -> None:
    r = L.parse([f"lock\tbusy\t{record()}"])
    assert L.event_text(r, "busy", SINCE + 5) == "waiting for apply by alice@laptop since 12:01:05"
    # another day: the date too
    assert L.event_text(r, "busy", SINCE + 86400) == (
        "waiting for apply by alice@laptop since 2026-12-01 12:01:05")


def test_a_timeout_names_the_holder() -> None:
    r = L.parse([f"lock\tbusy\t{record()}", f"lock\ttimeout\theld\t{record()}"])
    assert L.failure(r, 7, SINCE) == (
        "host lock held by apply by alice@laptop since 12:01:05; gave up after 7 s (--lock-timeout)")
    r = L.parse(["lock\tarmed\tfirewall-00aa11bb\t1796126470", f"lock\ttimeout\tarmed\t{record()}"])
    assert L.failure(r, 7, SINCE) == ("a rollback armed on the host (firewall-00aa11bb) had not "
                                      "run after 7 s (--lock-timeout); nothing done")
    assert L.failure(L.parse(["lock\terror\tflock not found"]), 7, SINCE) == (
        "host lock: flock not found")
    assert L.failure(L.parse([]), 7, SINCE) == "host lock: the host did not say it took the lock"


def test_plan_says_an_apply_holds_the_host() -> None:
    r = L.parse([f"lock\theld\t{record()}", "lock\tarmed\tsshd-0a1b2c3d\t1796126470"])
    assert L.note(r, SINCE, plan=True) == (
        "apply by alice@laptop since 12:01:05 holds the host: this plan may be out of date when "
        "it finishes; a rollback is armed on the host (sshd-0a1b2c3d): the host changes when "
        "it fires")
    assert L.note(L.parse([]), SINCE, plan=True) == ""
    stale = L.parse([f"lock\tstale\t{record(state='silent', ended=str(SINCE + 65))}"])
    assert L.note(stale, SINCE, plan=True) == (
        f"the lock of apply by alice@laptop since 12:01:05 was never released: its heartbeat "
        f"stopped (no byte for {L.LIFELINE} s) at 12:02:10; the next apply takes it over")


def test_apply_notes_the_takeover_and_the_wait() -> None:
    r = L.parse([f"lock\tstale\t{record(state='closed', ended=str(SINCE + 1))}",
                 "lock\tarmed\tsshd-0a1b2c3d\t1796126470", "lock\tacquired\t12\t1796126477"])
    assert L.note(r, SINCE, plan=False) == (
        "took over a stale lock from apply by alice@laptop since 12:01:05: its SSH session "
        "ended at 12:01:06 without releasing it; waited 12 s for its rollback; planned from "
        "facts read after")


def test_who_we_are_is_made_safe() -> None:
    assert L.operator_id("alice", "laptop.example.org") == "alice@laptop"
    assert L.operator_id("al ice\x1b", "lap\ntop") == "al_ice_@lap_top"
    assert L.operator_id("", "") == "unknown@unknown"


def test_the_spec_refuses_what_could_reach_the_shell() -> None:
    with pytest.raises(ValueError):
        L.Spec("alice@laptop'; reboot #", "apply", TOKEN_A)
    with pytest.raises(ValueError):
        L.Spec("alice@laptop", "apply", "$(reboot)")
    with pytest.raises(ValueError):
        L.guard("x'y", "true\n")


# --- wait-die over one run's hosts (provision.hosts.converge.Contention) -----------------

class FakeLock:
    def __init__(self) -> None:
        self.token = TOKEN_B
        self.released = 0

    def release(self) -> None:
        self.released += 1


def _run(name: str, status: str = "pending") -> tuple[Any, FakeLock]:
    from provision.hosts.converge import HostRun
    from provision.inventory.model import Host

    host = Host.__new__(Host)
    object.__setattr__(host, "name", name)
    fake = FakeLock()
    run = HostRun(host, status=status)
    run.lock = fake
    run.lock_report = L.Report()
    return run, fake


def _busy(token: str) -> L.Report:
    return L.parse([f"lock\tbusy\t{record(token=token)}"])


def test_a_younger_run_lets_go_of_what_it_holds_while_it_waits_for_an_older_one() -> None:
    from provision.hosts.converge import Contention

    said: list[tuple[str, str]] = []
    c = Contention(TOKEN_B, lambda h, kind, r: said.append((h.name, kind)))
    gpu1, lock1 = _run("gpu1")
    c.prepared(gpu1)
    assert lock1.released == 0  # nobody waits: kept
    gpu2, _ = _run("gpu2")
    c.on_event(gpu2.host, "busy", _busy(TOKEN_A))
    assert lock1.released == 1 and ("gpu1", "yield") in said
    gpu3, lock3 = _run("gpu3")
    c.prepared(gpu3)  # acquired while gpu2 still waits: let go too
    assert lock3.released == 1
    c.prepared(gpu2)  # gpu2 got its lock at last: kept
    assert c.take_redo() == {"gpu1", "gpu3"} and c.take_redo() == set()
    assert set(c.held) == {"gpu2"}


def test_an_older_run_waits_holding() -> None:
    from provision.hosts.converge import Contention

    c = Contention(TOKEN_A)
    gpu1, lock1 = _run("gpu1")
    c.prepared(gpu1)
    gpu2, _ = _run("gpu2")
    c.on_event(gpu2.host, "busy", _busy(TOKEN_B))  # a younger holder
    assert lock1.released == 0 and c.take_redo() == set()
    # an unreadable record: cannot tell who is older, so yield
    c.on_event(gpu2.host, "busy", L.parse(["lock\tbusy\tgarbage"]))
    assert lock1.released == 1 and c.take_redo() == {"gpu1"}


def test_the_heartbeat_reaches_every_held_lock_until_released() -> None:
    import threading

    from provision.hosts.gather import HeldLock

    class Channel:
        def __init__(self) -> None:
            self.sent: list[bytes] = []
            self.beat = threading.Event()
            self.closed = False

        def send(self, data: bytes) -> int:
            self.sent.append(data)
            if data == b".":
                self.beat.set()
            return len(data)

        def shutdown_write(self) -> None:
            pass

        def close(self) -> None:
            self.closed = True

    ch = Channel()
    held = HeldLock(ch, TOKEN_A)
    assert ch.beat.wait(timeout=L.BEAT * 4), "no heartbeat"
    held.release()
    held.release()  # once only
    assert ch.sent[-1] == b"q" and ch.sent.count(b"q") == 1 and ch.closed


def test_a_holder_that_left_no_record_is_named_from_proc_locks_safely() -> None:
    r = L.parse(["lock\tflock\t4242\t1001\tbob\tflock", "lock\tflock\t77\t-\t-\t\x1b]52;c;x\x07",
                 "lock\tflock\tnot-a-pid\t0\troot\tx", "lock\tflock\t1\t0\troot", "lock\tbusy\t"])
    assert [f.pid for f in r.flockers] == [4242, 77] and r.malformed == 2
    assert L.event_text(r, "busy", SINCE) == (
        "waiting for a process that left no record: pid 4242 (uid 1001 bob: flock), "
        "pid 77 (uid ?: \\x1b]52;c;x\\x07)")
    assert L.note(L.parse(["lock\tflock\t9\t0\troot\tsleep", "lock\theld\t"]), SINCE, plan=True) == (
        "a process that left no record: pid 9 (uid 0 root: sleep) holds the host: this plan may "
        "be out of date when it finishes")
    # an account name that is not one is not printed as one
    assert L.parse(["lock\tflock\t5\t7\tb\u202eob\tx"]).flockers[0].account == "?"
