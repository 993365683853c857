"""Ask many DNS questions at once, with a bound on the queries in flight (asyncio).

I/O only: the questions come from `zonecheck.questions`, the answers go back to
`zonecheck.judge`. Each question is one UDP query (TCP when the answer is truncated),
built and read exactly as `propagation.query` does (`propagation.question`,
`propagation.parse_response`). asyncio rather than a thread pool: thousands of
concurrent queries cost one socket each and no thread (see docs/benchmarks.md for the
measurement). A server that has not answered `GIVE_UP_AFTER` queries in a row, and
never answered at all, is not asked the rest: its remaining answers say so, and a down
server costs seconds, not records × timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

import dns.asyncquery
import dns.exception
import dns.flags

from .propagation import Answer, Target, parse_response, question
from .records import RRset
from .zonecheck import ZoneReport, judge, questions

DEFAULT_IN_FLIGHT = 64
GIVE_UP_AFTER = 16

Question = tuple[Target, str, str]


@dataclass(frozen=True)
class ZoneCheck:
    report: ZoneReport
    queries: int
    seconds: float          # asking only (the judgement is milliseconds)


def check_zone(zone: str, records: Sequence[RRset], targets: Sequence[Target], *,
               now: float | None = None, in_flight: int = DEFAULT_IN_FLIGHT,
               timeout: float = 2.0) -> ZoneCheck:
    """Ask every server about every declared record of `zone` and judge the answers."""
    asked = questions(records, targets)
    t0 = time.perf_counter()
    answers = ask_all(asked, in_flight=in_flight, timeout=timeout)
    seconds = time.perf_counter() - t0
    report = judge(zone, records, targets, answers, time.time() if now is None else now)
    return ZoneCheck(report, len(asked), seconds)


def ask_all(questions: Sequence[Question], *, in_flight: int = DEFAULT_IN_FLIGHT,
            timeout: float = 2.0) -> dict[Question, Answer]:
    """One answer per question (TIMEOUT/ERROR answers for servers that did not answer)."""
    return asyncio.run(_ask_all(questions, max(1, in_flight), timeout))


async def _ask_all(questions: Sequence[Question], in_flight: int,
                   timeout: float) -> dict[Question, Answer]:
    gate = asyncio.Semaphore(in_flight)
    silent: dict[Target, int] = {}       # timeouts in a row, of servers never heard from
    heard: set[Target] = set()

    async def one(q: Question) -> Answer:
        target, name, rtype = q
        async with gate:
            if target not in heard and silent.get(target, 0) >= GIVE_UP_AFTER:
                return Answer(target, "TIMEOUT", error=f"not asked: {GIVE_UP_AFTER} queries "
                              f"in a row got no answer within {timeout:g} s")
            a = await _query(target, name, rtype, timeout)
        if a.status == "TIMEOUT":
            silent[target] = silent.get(target, 0) + 1
        else:
            heard.add(target)
        return a

    answers = await asyncio.gather(*(one(q) for q in questions))
    return dict(zip(questions, answers, strict=True))


async def _query(target: Target, name: str, rtype: str, timeout: float) -> Answer:
    try:
        q = question(target, name, rtype)
        r = await dns.asyncquery.udp(q, target.address, port=target.port, timeout=timeout)
        if r.flags & dns.flags.TC:
            r = await dns.asyncquery.tcp(q, target.address, port=target.port, timeout=timeout)
    except dns.exception.Timeout:
        return Answer(target, "TIMEOUT", error=f"no answer within {timeout:g} s")
    except (OSError, dns.exception.DNSException) as e:
        return Answer(target, "ERROR", error=str(e) or type(e).__name__)
    return parse_response(target, r, name, rtype)
