"""The guard of the pure test folders (tests/unit, tests/facts, tests/steps): no subprocess,
no fork, no socket that binds or connects. A test that needs one belongs in tests/integration
(a real sh, moto, the Cloud DNS fake, `uv build`, the CLI as a process).

A pure folder's conftest imports the two hooks below. They wrap the setup and the call of
every test collected under that folder (not its teardown: the session's own finalizers, a
lab's teardown among them, run in the teardown of the session's last test): runtest hooks in a conftest apply only
to the items below it, so tests/integration and the lab are untouched even in one
`pytest tests` session. Socket pairs (`socket.socketpair()`, an in-process channel with no
address) stay allowed: they reach nothing outside the process.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest


class ImpureTest(AssertionError):
    """A unit test started a process or opened a network connection."""


def _refuse(what: str) -> Callable[..., Any]:
    def refuse(*args: object, **kwargs: object) -> Any:
        raise ImpureTest(f"this folder holds pure tests, and this test {what}: move it to "
                         "tests/integration (see tests/support/purity.py)")
    return refuse


# (owner, attribute, what the test did). Popen._execute_child is where every subprocess
# entry point (run, check_output, asyncio's subprocesses) ends up, however it was imported.
_GUARDED: tuple[tuple[object, str, str], ...] = (
    (subprocess.Popen, "_execute_child", "started a subprocess"),
    (os, "system", "started a subprocess (os.system)"),
    (os, "posix_spawn", "started a subprocess (os.posix_spawn)"),
    (os, "posix_spawnp", "started a subprocess (os.posix_spawnp)"),
    (os, "fork", "forked"),
    (socket.socket, "connect", "opened a socket connection"),
    (socket.socket, "connect_ex", "opened a socket connection"),
    (socket.socket, "bind", "bound a socket (a server belongs in tests/integration)"),
)


@contextmanager
def _pure() -> Iterator[None]:
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in _GUARDED
             if hasattr(owner, name)]
    for owner, name, what in _GUARDED:
        if hasattr(owner, name):
            setattr(owner, name, _refuse(what))
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    with _pure():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    with _pure():
        return (yield)
