"""What a run's last line says. Pure.

A headline is about everything the run was asked to look at: it never says "No changes"
or "audited 3 hosts" over hosts that were never reached. When some could not be looked at,
that comes first, with how many and why ("Nothing could be planned: 3 hosts unreachable.",
"2 of 3 hosts could not be planned (2 unreachable). No changes on the other 1.").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def why(statuses: Sequence[str]) -> str:
    """'2 unreachable, 1 failed': each status with its count, the most frequent first
    (ties in the order met)."""
    return ", ".join(f"{n} {s}" for s, n in Counter(statuses).most_common())


def _none_of(verb: str, statuses: Sequence[str], noun: str) -> str:
    """'Nothing could be planned: 3 hosts unreachable.' (the noun once, with the first count)"""
    (first, n), *rest = Counter(statuses).most_common()
    tail = "".join(f", {m} {s}" for s, m in rest)
    return f"Nothing could be {verb}: {plural(n, noun)} {first}{tail}."


def plan_line(counts: Mapping[str, int], failed: Sequence[str], total: int,
              noun: str = "host") -> str:
    """The plan's count line. `counts`: add/change/destroy over what was planned; `failed`:
    the status word of each of the `total` sections that could not be planned."""
    changes = (f"{counts['add']} to add, {counts['change']} to change, "
               f"{counts['destroy']} to destroy")
    if not failed:
        return f"Plan: {changes}." if any(counts.values()) else "No changes."
    if len(failed) >= total:
        return _none_of("planned", failed, noun)
    head = (f"{len(failed)} of {plural(total, noun)} could not be planned ({why(failed)}).")
    rest = total - len(failed)
    if any(counts.values()):
        return f"{head} Plan for the other {rest}: {changes}."
    return f"{head} No changes on the other {rest}."


def audit_line(total: int, unreachable: int, seconds: float, groups: str) -> str:
    """The audit's last line: how many hosts were really audited."""
    groups = f"security groups: {groups}"
    if not unreachable:
        return f"audited {plural(total, 'host')} in {seconds:.2f} s ({groups})"
    if unreachable >= total:
        return (f"nothing could be audited: {plural(total, 'host')} unreachable "
                f"({seconds:.2f} s; {groups})")
    return (f"audited {total - unreachable} of {plural(total, 'host')} in {seconds:.2f} s, "
            f"{unreachable} unreachable ({groups})")


def apply_line(statuses: Sequence[str], noun: str = "host") -> str:
    """The apply's last line, under its recap: how many hosts were applied to, and the rest
    with their status. Applied means converged: `changed` or `ok` (nothing to do)."""
    done = sum(1 for s in statuses if s in ("changed", "ok"))
    rest = [s for s in statuses if s not in ("changed", "ok")]
    if not rest:
        changed = sum(1 for s in statuses if s == "changed")
        return f"Applied: {plural(done, noun)} converged, {changed} changed."
    if not done:
        return _none_of("applied", rest, noun)
    return f"Applied to {done} of {plural(len(statuses), noun)}; not to {len(rest)} ({why(rest)})."
