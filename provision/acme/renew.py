"""`provision certs renew`: every certificate the inventory's doors need, renewed when due,
installed on its host and seen served (I/O: hosts over SSH, the CA, the zones).

Per host, one connection: one exec reads every name's CSR and installed chain (the key
and CSR made there when absent), and one exec per certificate issued installs it,
reloads the door and reads back its port. Decisions: `renewal.decide` (a third of the
lifetime, or the CA's ARI window), `host.parse_*` (what a host says, checked).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from provision.errors import OperationError
from provision.frozen import frozen
from provision.inventory.model import Host, Https, Inventory
from provision.ssh.connect import connect
from provision.ssh.session import Remote
from provision.text import printable

from . import host as on_host
from . import record as seen
from .dns01 import Dns01
from .issue import Ca, issue
from .renewal import decide

Log = Callable[[str], None]


@frozen
class Outcome:
    host: str
    name: str
    status: str             # renewed, current, failed
    reason: str
    fingerprint: str = ""   # the certificate installed (renewed) or held (current)
    served: str = ""        # what the port served after the install
    not_after: str = ""     # of the certificate now in place, ISO 8601
    seconds: float = 0.0

    def as_json(self) -> dict[str, object]:
        return {"host": self.host, "name": self.name, "status": self.status,
                "reason": self.reason, "fingerprint": self.fingerprint,
                "served": self.served, "not_after": self.not_after,
                "seconds": round(self.seconds, 3)}


def doors(inv: Inventory, hosts: Sequence[Host]) -> list[tuple[Host, list[Https]]]:
    """The selected hosts with a door, and the certificates each needs (by name, once)."""
    out = []
    for h in hosts:
        seen: dict[str, Https] = {}
        for s in h.services:
            if s.https is not None:
                seen.setdefault(s.https.name, s.https)
        if seen:
            out.append((h, list(seen.values())))
    return out


def maybe_due(hosts: Sequence[Host], now: dt.datetime,
              on_host: Mapping[str, Mapping[str, str | None]] | None = None) -> list[Host]:
    """The hosts with a door whose certificate may be due by what this machine last saw
    (none seen yet counts as due); the others need no remote command. `on_host`: host ->
    name -> the fingerprint the host holds (from the facts the run already read; None: a
    placeholder or nothing): a host that holds another certificate than the one this
    machine recorded (a new host under an old name, a placeholder just made) is due."""
    out = []
    for h in hosts:
        names = {s.https.name for s in h.services if s.https is not None}
        held = (on_host or {}).get(h.name)
        if any(decide(seen.load(h.name, n), n, now).renew or _stale(h.name, n, held)
               for n in names):
            out.append(h)
    return out


def _stale(host: str, name: str, held: Mapping[str, str | None] | None) -> bool:
    """The host holds another certificate for `name` than this machine recorded."""
    if held is None:
        return False
    mine = seen.fingerprint(host, name)
    return mine is None or held.get(name) != mine


def renew(inv: Inventory, hosts: Sequence[Host], *, force: bool = False,
          accept_new: bool = False, log: Log = lambda _: None,
          now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)) -> list[Outcome]:
    outcomes: list[Outcome] = []
    ca: Ca | None = None
    dns = Dns01(inv)
    for h, certs in doors(inv, hosts):
        names = [c.name for c in certs]
        try:
            chain = connect(inv, h, accept_new)
        except Exception as e:  # any failure to reach a host is its outcome
            outcomes += [Outcome(h.name, n, "failed", f"cannot connect: {printable(str(e))}")
                         for n in names]
            continue
        try:
            remote = Remote(chain)
            out = remote.sh(on_host.read_script(names))
            if out.status != 0:
                raise OperationError(f"reading the certificates failed (exit {out.status}): "
                                     f"{printable(out.stderr.strip()[-300:])}")
            held_now = on_host.parse_read(out.stdout, names)
            for c in certs:
                t0 = time.perf_counter()
                try:
                    if ca is None:
                        ca = Ca(inv)
                    o = _one(inv, h, c, held_now[c.name], ca, dns, remote, force, now(), log)
                except OperationError as e:
                    o = Outcome(h.name, c.name, "failed", e.message)
                outcomes.append(replace(o, seconds=time.perf_counter() - t0))
        except (OperationError, on_host.HostAnswerError) as e:
            why = e.message if isinstance(e, OperationError) else str(e)
            outcomes += [Outcome(h.name, n, "failed", why) for n in names
                         if not any(o.host == h.name and o.name == n for o in outcomes)]
        finally:
            chain.close()
    return outcomes


def _one(inv: Inventory, h: Host, c: Https, held_now: on_host.OnHost, ca: Ca, dns: Dns01,
         remote: Remote, force: bool, now: dt.datetime, log: Log) -> Outcome:
    if held_now.refused:
        return Outcome(h.name, c.name, "failed", held_now.refused)
    chain = None if held_now.self_signed else held_now.fullchain_pem
    current = on_host.held(chain) if chain else None
    ari = ca.renewal_time(chain) if chain and current else None
    d = decide(current, c.name, now, ari)
    if not d.renew and not force:
        if chain and current:
            seen.save(h.name, c.name, on_host.fingerprint(chain), current)
        return Outcome(h.name, c.name, "current", d.reason,
                       on_host.fingerprint(chain) if chain else "",
                       not_after=current.not_after.isoformat() if current else "")
    reason = "renewal forced (--force)" if force and not d.renew else d.reason
    log(f"{h.name} {c.name}: {reason}: ordering")
    issued = issue(inv, held_now.csr_pem, [c.name], ca=ca, dns=dns,
                   log=lambda m: log(f"{h.name} {c.name}: {m}"))
    out = remote.sh(on_host.install_script(c.name, issued.fullchain_pem,
                                           on_host.connect_address(h.address, c.port)))
    if out.status != 0:
        raise OperationError(f"installing failed (exit {out.status}): "
                             f"{printable(out.stderr.strip()[-300:])}")
    inst = on_host.parse_install(out.stdout)
    new = on_host.held(issued.fullchain_pem)
    after = new.not_after.isoformat() if new else ""
    if inst.refused:
        return Outcome(h.name, c.name, "failed", f"the host refused it: {inst.refused}")
    if inst.reload == "failed":
        return Outcome(h.name, c.name, "failed", "the door's reload failed: the previous "
                       "certificate was put back and keeps serving", inst.fingerprint)
    if inst.reload == "inactive":
        return Outcome(h.name, c.name, "renewed", f"{reason}; installed, but the door is not "
                       "running, so nothing serves it yet", inst.fingerprint, "", after)
    if not inst.serving:
        return Outcome(h.name, c.name, "failed", f"installed and reloaded, but port {c.port} "
                       f"serves {inst.served or 'nothing'} for {c.name}", inst.fingerprint,
                       inst.served, after)
    if new is not None:
        seen.save(h.name, c.name, inst.fingerprint, new)
    return Outcome(h.name, c.name, "renewed", reason, inst.fingerprint, inst.served, after)
