"""`provision audit --cluster NAME`, the shell: one connection per node, then each probe of
`provision.cluster_matrix` in turn (iperf3 serving on the target, the source connecting).

The client starts only once the server said it listens (its "Server listening" line), never
after a guessed delay; a server that cannot listen (the port is held) makes the probe
"busy". A server no client reached is stopped with its process group, as `exec` stops a
command."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from provision.cluster_matrix import (
    READY,
    Probe,
    Result,
    busy,
    client_command,
    probes,
    result,
    server_command,
)
from provision.hosts.reach import Unreachable, open_chain
from provision.inventory.model import Cluster, Inventory
from provision.ssh import exec_run
from provision.ssh.connect import Chain, Gateways

CAP = 256 * 1024
READY_WAIT = 30.0  # seconds for a server to say it listens (a cold host starts iperf3 slowly)
Progress = Callable[[Probe, Result], None]


def _connect(inv: Inventory, names: list[str], accept_new: bool,
             gateways: Gateways) -> tuple[dict[str, Chain], dict[str, str]]:
    chains: dict[str, Chain] = {}
    errors: dict[str, str] = {}

    def one(name: str) -> None:
        try:
            chains[name] = open_chain(inv, inv.node(name), accept_new, gateways=gateways)
        except Unreachable as e:
            errors[name] = str(e)

    with ThreadPoolExecutor(max_workers=min(16, len(names) or 1)) as pool:
        list(pool.map(one, names))
    for name, chain in list(chains.items()):  # iperf3 is what measures: say where it is missing
        ran = exec_run.run(chain, "command -v iperf3", sudo=False, cap=4096, timeout=30,
                           stop=threading.Event())
        if ran.exit_status != 0:
            errors[name] = ("iperf3 is not installed (add it to the host's or a role's "
                            "`packages` and apply)")
    return chains, errors


def _probe(chains: dict[str, Chain], p: Probe, seconds: float) -> Result:
    ready = threading.Event()
    stop = threading.Event()
    said: list[str] = []

    def on_line(stream: str, text: str) -> None:
        said.append(text)
        if READY.search(text):
            ready.set()

    served: list[exec_run.Ran] = []

    def serve() -> None:
        try:
            served.append(exec_run.run(chains[p.target], server_command(p.port), sudo=False,
                                       cap=CAP, timeout=seconds + READY_WAIT + 30, stop=stop,
                                       on_line=on_line))
        finally:
            ready.set()  # ended without listening: the waiter looks at why

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        ready.wait(READY_WAIT)
        if served or not any(READY.search(t) for t in said):
            text = " ".join(said)
            return Result(p, "busy" if busy(text) else "error",
                          why=("port held on the target (a job?)" if busy(text) else
                               f"iperf3 did not listen on {p.target}: {text[:200]!r}"))
        ran = exec_run.run(chains[p.source], client_command(p, seconds), sudo=False, cap=CAP,
                           timeout=seconds + 30, stop=threading.Event())
        return result(p, ran.exit_status, ran.stdout.text())
    finally:
        stop.set()  # a server whose client never came (closed port) is stopped
        server.join(timeout=60)


def measure(inv: Inventory, cluster: Cluster, *, seconds: float, accept_new: bool,
            progress: Progress | None = None) -> list[Result]:
    """Every probe of the cluster, one at a time."""
    todo = probes(inv, cluster)
    names = list(dict.fromkeys(n for p in todo for n in (p.source, p.target)))
    out: list[Result] = []
    with Gateways() as gateways:
        chains, errors = _connect(inv, names, accept_new, gateways)
        try:
            for p in todo:
                down = [n for n in (p.source, p.target) if n in errors]
                r = (Result(p, "error", why="; ".join(f"{n}: {errors[n]}" for n in down))
                     if down else _probe(chains, p, seconds))
                out.append(r)
                if progress is not None:
                    progress(p, r)
        finally:
            for chain in chains.values():
                chain.close()
    return out
