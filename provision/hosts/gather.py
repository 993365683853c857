"""Gather facts from a host (I/O): connect through its jump chain, run the one probe, parse.

No playbook needed: `converge` asks for what its steps need, `audit` for what it reports.
Decides nothing: the request comes from the caller, the parse from `provision.facts`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from provision.errors import OperationError
from provision.facts import Facts, FactsError, Request, parse, probe_script
from provision.inventory.model import Host, Inventory
from provision.ssh.connect import Chain, Gateways, connect
from provision.ssh.errors import HostKeyError
from provision.ssh.retry import RETRY_WINDOW, Retried, backoff, transient
from provision.ssh.session import Remote

PROBE_TIMEOUT = 120.0
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
               window: float = RETRY_WINDOW, gateways: Gateways | None = None) -> Chain:
    """`connect`, retried with backoff while the failure is transient (a host still booting,
    sshd shedding load) for at most `window` seconds; every failure becomes Unreachable with
    a readable reason. `Chain.retried` says what it took."""
    deadline = time.monotonic() + window
    attempt = 0
    last = last_said = ""
    while True:
        try:
            chain = connect(inv, host, accept_new, gateways)
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


def probe(remote: Remote, request: Request) -> Facts:
    """One remote exec: the probe for `request`. Raises FactsError."""
    out = remote.sh(probe_script(request), request.args(), timeout=PROBE_TIMEOUT)
    if out.status != 0:
        raise FactsError(f"probe exited {out.status}: {out.stderr.strip()[-500:]}")
    return parse(out.stdout)


@dataclass
class Gathered:
    chain: Chain
    remote: Remote
    facts: Facts

    def close(self) -> None:
        self.chain.close()


def gather(inv: Inventory, host: Host, request: Request, accept_new: bool = False,
           gateways: Gateways | None = None) -> Gathered:
    """Connect and probe. Raises Unreachable or FactsError (the chain is closed then)."""
    chain = open_chain(inv, host, accept_new, gateways=gateways)
    remote = Remote(chain)
    try:
        return Gathered(chain, remote, probe(remote, request))
    except BaseException:
        chain.close()
        raise


def connecting(inv: Inventory, host: Host, accept_new: bool,
               gateways: Gateways | None = None) -> Future[Any]:
    """Start `open_chain` in the background (network round trips while the caller renders)."""
    return in_background(lambda: open_chain(inv, host, accept_new, gateways=gateways))


@dataclass
class HostFacts:
    """What `gather_many` found on one host: facts, or why there are none."""

    host: Host
    facts: Facts | None = None
    error: str = ""
    seconds: float = 0.0
    remote_execs: int = 0


def gather_one(inv: Inventory, host: Host, request: Request, accept_new: bool = False,
               gateways: Gateways | None = None) -> HostFacts:
    """`gather` and close, never raising: a failure lands in `error`."""
    started = time.monotonic()
    try:
        g = gather(inv, host, request, accept_new, gateways)
    except Exception as e:
        return HostFacts(host, error=reason(e), seconds=time.monotonic() - started)
    try:
        return HostFacts(host, g.facts, seconds=time.monotonic() - started,
                         remote_execs=g.remote.execs)
    finally:
        g.close()


def gather_many(inv: Inventory, hosts: tuple[Host, ...] | list[Host], request: Request,
                accept_new: bool = False, forks: int = 10) -> list[HostFacts]:
    """One connection chain and one probe per host, hosts in parallel; in the order given."""
    from concurrent.futures import ThreadPoolExecutor

    # paramiko's first import is not thread-safe (circular imports): import it here first
    import paramiko  # noqa: F401

    with Gateways() as gateways, \
            ThreadPoolExecutor(max_workers=max(1, min(forks, len(hosts) or 1))) as pool:
        return list(pool.map(lambda h: gather_one(inv, h, request, accept_new, gateways), hosts))
