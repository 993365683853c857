"""Which connection failures are retried, how long we wait, what the recap says (pure)."""

from __future__ import annotations

import pytest

from provision.ssh.retry import Retried, backoff, transient


@pytest.mark.parametrize("message", [
    "Authentication failed: transport shut down or saw EOF",
    "Error reading SSH protocol banner",
    "[Errno 104] Connection reset by peer",
    "System is booting up. Unprivileged users are not permitted to log in yet.",
])
def test_booting_and_overloaded_hosts_are_retried(message: str) -> None:
    assert transient(message)


@pytest.mark.parametrize("message", [
    "Authentication failed.",
    "[Errno 111] Connection refused",
    "gpu1: unknown host key for 10.0.0.1 (ssh-ed25519 SHA256:x); refusing",
    "timed out",
])
def test_answers_a_retry_cannot_change_are_not(message: str) -> None:
    assert not transient(message)


def test_backoff_doubles_up_to_a_cap() -> None:
    assert [backoff(i) for i in range(6)] == [0.5, 1, 2, 4, 8, 8]


def test_the_recap_names_the_retries_and_the_server_message() -> None:
    assert Retried(0).note() == ""
    assert Retried(3, "Authentication failed: transport shut down or saw EOF",
                   "System is booting up.\n").note() == "booting, retried 3×: System is booting up."
    assert Retried(2, "Error reading SSH protocol banner").note() == (
        "transient, retried 2× (Error reading SSH protocol banner)")
