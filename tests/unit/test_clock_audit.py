"""`audit`'s clock findings on the timesync fact's records (tests/facts/timesync/ holds the
recorded ones)."""

from __future__ import annotations

from provision.exposure.clock import clock_findings
from provision.facts import parse
from provision.facts.timesync import SPEC
from provision.inventory.model import Host
from tests.support.probe_records import wrap

HOST = Host(name="gpu1", address="10.0.1.21", user="ubuntu", port=22, identity_file=None,
            jump_chain=())
DAEMONS = ["tdaemon\tchrony\tinactive", "tdaemon\tsystemd-timesyncd\tinactive"]


def found(*records: str) -> list[tuple[str, str, str]]:
    t = parse(wrap(list(records))).get(SPEC)
    return [(f.severity, f.code, f.message) for f in clock_findings(HOST, t)]


def test_a_synchronised_clock_says_nothing() -> None:
    assert found("tvirt\tnone", "tsync\tNTP=yes", "tsync\tNTPSynchronized=yes",
                 "tdaemon\tchrony\tactive") == []


def test_no_daemon_is_a_warning_that_says_so() -> None:
    ((sev, code, msg),) = found("tvirt\tnone", "tsync\tNTP=no", "tsync\tNTPSynchronized=no",
                                *DAEMONS)
    assert (sev, code) == ("warning", "clock-unsynchronised")
    assert "no time daemon runs (NTP=no)" in msg


def test_a_daemon_that_cannot_reach_its_servers() -> None:
    ((sev, _, msg),) = found("tvirt\tnone", "tsync\tNTP=yes", "tsync\tNTPSynchronized=no",
                             "tdaemon\tsystemd-timesyncd\tactive")
    assert sev == "warning" and "although systemd-timesyncd runs" in msg


def test_in_a_container_the_clock_is_the_machines() -> None:
    ((sev, _, msg),) = found("tvirt\tsystemd-nspawn", "tsync\tNTPSynchronized=no", *DAEMONS)
    assert sev == "info" and "systemd-nspawn container, whose clock is the machine's" in msg


def test_unprobed_says_nothing_and_a_silent_timedatectl_is_unknown() -> None:
    assert found() == []
    assert found("tvirt\tnone", *DAEMONS) == [
        ("info", "clock-unknown", "timedatectl did not answer: whether the clock is "
                                  "synchronised is unknown")]
