"""Reaching a host (I/O): open its chain, retried while the failure is transient, every
failure one readable line (`Unreachable`). Apart from `provision.hosts.gather` (the probe,
the host lock and the facts they need, Jinja templates among them) so that `provision exec`,
which needs only the connection, does not import them (~0.1 s of its start-up)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import TypeVar

from provision.errors import OperationError
from provision.inventory.model import Host, Inventory
from provision.ssh.connect import Chain, Gateways, connect
from provision.ssh.errors import HostKeyError
from provision.ssh.login import DEFAULT_LOGIN, Login
from provision.ssh.retry import RETRY_WINDOW, Retried, backoff, transient

T = TypeVar("T")


class Unreachable(OperationError):
    """The host could not be reached or refused us; the message says why, in one line."""


def reason(e: BaseException) -> str:
    """One line for a recap: the first line of the error, or its type."""
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0] if "\n" in text else text


def in_background(fn: Callable[[], T]) -> Future[T]:
    """Run `fn` in a daemon thread of its own (no pool to shut down); its Future."""
    fut: Future[T] = Future()

    def target() -> None:
        try:
            fut.set_result(fn())
        except BaseException as e:
            fut.set_exception(e)

    threading.Thread(target=target, daemon=True, name="connect").start()
    return fut


def connecting(inv: Inventory, host: Host, accept_new: bool,
               gateways: Gateways | None = None) -> Future[Chain]:
    """Start `open_chain` in the background (network round trips while the caller renders)."""
    return in_background(lambda: open_chain(inv, host, accept_new, gateways=gateways))


class Closing:
    """Connections closed while a run goes on. A close waits for the hop's calls in
    flight (`ChannelSocket`; ~1 ms since it wakes the reader, ~0.1 s before); when no
    worker moves on to another host meanwhile (`background`), that wait runs beside the
    rest of the run (its output), and `wait` ends it before the bastion hops the
    connections ride on are closed. Otherwise a close is done at once, so a worker
    never holds more than one host's connection."""

    def __init__(self) -> None:
        self._pending: list[Future[None]] = []

    def close(self, fn: Callable[[], None], background: bool) -> None:
        if background:
            self._pending.append(in_background(fn))
        else:
            fn()

    def wait(self) -> None:
        wait(self._pending)


def _server_message(e: BaseException) -> str:
    """The text sshd sent before it dropped us (a pam_nologin message), when paramiko kept it."""
    transport = getattr(e, "provision_transport", None)
    if transport is None:
        return ""
    try:
        banner = transport.get_banner()
    except Exception:
        return ""
    return banner.decode("utf-8", "replace") if isinstance(banner, bytes) else str(banner or "")


def open_chain(inv: Inventory, host: Host, accept_new: bool,
               window: float = RETRY_WINDOW, gateways: Gateways | None = None,
               login: Login = DEFAULT_LOGIN) -> Chain:
    """`connect`, retried with backoff while the failure is transient (a host still booting,
    sshd shedding load) for at most `window` seconds; every failure becomes Unreachable with
    a readable reason. `Chain.retried` says what it took."""
    deadline = time.monotonic() + window
    attempt = 0
    last = last_said = ""
    while True:
        try:
            chain = connect(inv, host, accept_new, gateways, login)
        except HostKeyError as e:
            raise Unreachable(str(e)) from None
        except Exception as e:
            text, said = reason(e), _server_message(e)
            wait = backoff(attempt)
            if not transient(text + " " + said) or time.monotonic() + wait > deadline:
                retried = Retried(attempt, text, said).note()
                raise Unreachable(f"cannot connect: {text}"
                                  + (f" ({retried}, then gave up)" if retried else "")
                                  + (f"; the server said: {said.strip()}" if said.strip() and not retried
                                     else "")) from None
            last, last_said = text, said
            time.sleep(wait)
            attempt += 1
            continue
        chain.retried = Retried(attempt, last if attempt else "", last_said if attempt else "")
        return chain
