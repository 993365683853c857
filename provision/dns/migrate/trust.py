"""Journals and markers are untrusted input: parsed with limits, checked like the inventory.

Pure, no I/O. Anyone who can write a file in the state directory can write a journal,
and anyone who can write a TXT record in the zone can write a migration marker. Neither
may steer provision anywhere the operator did not point it:

* a journal or marker acts only on the record it is filed under: the journal file of
  ``api.example.org`` must be about ``api.example.org`` (and the marker at
  ``_provision-migration.api.example.org`` is, by where it lives), of the same type as
  each other, in the zone the command was given;
* only on types provision manages (A, AAAA, CNAME: never NS, SOA, TXT …), never at the
  zone apex unless the inventory declares that record there, only inside the
  inventory's zones;
* with values valid for the type, TTLs of 1 to 604800 s, and times that are plausible.

Anything else raises `Untrusted` with the reason; the caller names the file or the TXT
record and sends nothing. JSON is read with limits (size, nesting depth, digits in a
number, no NaN/Infinity, no duplicate keys; UTF-8 errors are errors), so no content
ends in a traceback or a hang.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from provision.dnsdata import providers
from provision.dnsdata.names import canonical, in_zone, origin, problem, reserved
from provision.dnsdata.rdata import MIGRATE_TYPES, ttl_problem, values_problem
from provision.text import printable

from .journal import PHASES, VERSION, Journal, JournalError, Snapshot
from .marker import OPERATOR, Marker

MAX_BYTES = 256 * 1024       # a journal with a long history is a few KiB
MAX_DEPTH = 8
MAX_DIGITS = 20              # digits in one JSON number
MAX_HISTORY = 10_000
MAX_TEXT = 1024              # any one string field
# Seconds since the epoch, up to 2200-01-01; anything else is no time provision wrote.
MIN_TIME, MAX_TIME = 0.0, 7258118400.0


class Untrusted(JournalError):
    """A journal or marker provision will not act on (the message says why)."""


# --- JSON with limits ------------------------------------------------------------------

def parse_json(data: bytes) -> dict[str, Any]:
    """A JSON object from untrusted bytes, or Untrusted saying what is wrong."""
    if len(data) > MAX_BYTES:
        raise Untrusted(f"{len(data)} bytes, more than the {MAX_BYTES} a journal may have")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Untrusted(f"not UTF-8 (byte {e.start}: {e.reason})") from None
    depth = _depth(text)
    if depth > MAX_DEPTH:
        raise Untrusted(f"JSON nested {depth} levels deep, at most {MAX_DEPTH}")
    try:
        d = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant,
                       object_pairs_hook=_object)
    except json.JSONDecodeError as e:
        raise Untrusted(f"not JSON (line {e.lineno} column {e.colno}: {e.msg})") from None
    except (ValueError, RecursionError) as e:
        raise Untrusted(f"not JSON ({printable(str(e)[:200])})") from None
    if not isinstance(d, dict):
        raise Untrusted(f"not a JSON object but a {_kind(d)}")
    return d


def _depth(text: str) -> int:
    """The deepest nesting of [ and { outside strings (before json sees it: its
    recursion would otherwise raise, or take long, on a deep document)."""
    deepest = depth = 0
    in_str = escaped = False
    for c in text:
        if in_str:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    return deepest
        elif c in "]}":
            depth -= 1
    return deepest


def _int(s: str) -> int:
    if len(s.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"a number of {len(s)} digits (at most {MAX_DIGITS})")
    return int(s)


def _float(s: str) -> float:
    if len(s) > 2 * MAX_DIGITS + 6:
        raise ValueError(f"a number of {len(s)} characters")
    f = float(s)
    if not math.isfinite(f):
        raise ValueError(f"the number {s[:30]} is out of range")
    return f


def _constant(s: str) -> Any:
    raise ValueError(f"{s} is not a number a journal holds")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"the key {printable(k[:60])!r} appears twice")
        out[k] = v
    return out


def _kind(v: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "number",
            float: "number", type(None): "null"}.get(type(v), type(v).__name__)


# --- the journal's fields ----------------------------------------------------------------

_FIELDS = {"name", "type", "zone", "provider", "original_values", "original_ttl",
           "target_values", "lower_ttl", "phase", "started_at", "lowered_at", "switched_at",
           "verified_at", "forced", "final_ttl", "rollback_from", "token", "history", "version",
           "by"}


def from_json(text: str | bytes) -> Journal:
    """The journal a file holds (the inverse of journal.to_json), parsed with limits and
    every field checked; JournalError saying what is wrong otherwise."""
    return journal_from_dict(parse_json(text.encode() if isinstance(text, str) else text))


def journal_from_dict(d: Mapping[str, Any]) -> Journal:
    """A Journal from a parsed JSON object, every field checked (Untrusted otherwise)."""
    if d.get("version") != VERSION or type(d.get("version")) is not int:
        raise Untrusted(f"journal version {_show(d.get('version'))}, this provision reads {VERSION}")
    unknown = sorted(set(d) - _FIELDS)
    if unknown:
        raise Untrusted(f"unknown field {_show(unknown[0])} (a journal has {', '.join(sorted(_FIELDS))})")
    phase = d.get("phase")
    if phase not in PHASES:
        raise Untrusted(f"unknown phase {_show(phase)} (one of {', '.join(PHASES)})")
    zone = _text(d, "zone")
    if problem(origin(zone), wildcard=False) or not zone.endswith(".") or zone != zone.lower():
        raise Untrusted(f"zone {_show(zone)} is not an absolute, lowercase zone name")
    name = _text(d, "name")
    if name != canonical(name, zone) or not name.endswith("."):
        raise Untrusted(f"name {_show(name)} is not an absolute, lowercase name")
    why = problem(name) or reserved(name)
    if why:
        raise Untrusted(f"name {_show(name)}: {why}")
    rtype = _text(d, "type")
    if rtype not in MIGRATE_TYPES:
        raise Untrusted(f"type {_show(rtype)}: provision migrates only {', '.join(MIGRATE_TYPES)} records")
    provider = _text(d, "provider")
    if provider not in providers.PROVIDERS:
        raise Untrusted(f"provider {_show(provider)} (one of {', '.join(providers.names())})")
    original = _values(d, "original_values", rtype)
    target = _values(d, "target_values", rtype)
    original_ttl, lower_ttl = _ttl(d, "original_ttl"), _ttl(d, "lower_ttl")
    final_ttl = None if d.get("final_ttl") is None else _ttl(d, "final_ttl")
    started = _time(d, "started_at")
    times = {k: None if d.get(k) is None else _time(d, k)
             for k in ("lowered_at", "switched_at", "verified_at")}
    forced = d.get("forced", False)
    if type(forced) is not bool:
        raise Untrusted(f"forced is {_show(forced)}, not true or false")
    token = d.get("token", "")
    if not isinstance(token, str) or len(token) > MAX_TEXT or printable(token) != token:
        raise Untrusted(f"token {_show(token)} is not a provider's change id")
    by = d.get("by", "")
    if not isinstance(by, str) or (by and not OPERATOR.match(by)):
        raise Untrusted(f"by {_show(by)} is not user@host (letters, digits, . _ -)")
    history = d.get("history", [])
    if not isinstance(history, list) or len(history) > MAX_HISTORY:
        raise Untrusted(f"history is not a list of at most {MAX_HISTORY} [time, event] pairs")
    events: list[tuple[float, str]] = []
    for item in history:
        if not (isinstance(item, list) and len(item) == 2 and _is_num(item[0])
                and isinstance(item[1], str) and len(item[1]) <= MAX_TEXT):
            raise Untrusted(f"history entry {_show(item)} is not a [time, event] pair")
        events.append((float(item[0]), item[1]))
    return Journal(name=name, type=rtype, zone=zone, provider=provider,
                   original_values=original, original_ttl=original_ttl, target_values=target,
                   lower_ttl=lower_ttl, phase=phase, started_at=started,
                   lowered_at=times["lowered_at"], switched_at=times["switched_at"],
                   verified_at=times["verified_at"], forced=forced, final_ttl=final_ttl,
                   rollback_from=_snapshot(d.get("rollback_from"), rtype), token=token,
                   history=tuple(events), by=by)


def _show(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str)[:200]
    return repr(printable(text[:120]) + ("…" if len(text) > 120 else ""))


def _is_num(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _text(d: Mapping[str, Any], key: str) -> str:
    v = d.get(key)
    if not isinstance(v, str) or not v or len(v) > MAX_TEXT:
        raise Untrusted(f"{key} is {_show(v)}, not a text")
    return v


def _values(d: Mapping[str, Any], key: str, rtype: str) -> tuple[str, ...]:
    v = d.get(key)
    why = values_problem(rtype, v)
    if why:
        raise Untrusted(f"{key}: {why}")
    return tuple(sorted(set(v)))  # type: ignore[arg-type]  # a checked list of str


def _ttl(d: Mapping[str, Any], key: str) -> int:
    v = d.get(key)
    why = ttl_problem(v)
    if why:
        raise Untrusted(f"{key}: {why}")
    return int(v)  # type: ignore[arg-type]  # checked: an int


def _time(d: Mapping[str, Any], key: str) -> float:
    v: Any = d.get(key)
    if not _is_num(v) or not MIN_TIME <= v <= MAX_TIME:
        raise Untrusted(f"{key} is {_show(v)}, not a time (seconds since 1970, before 2200)")
    return float(v)


def _snapshot(rb: Any, rtype: str) -> Snapshot | None:
    if rb is None:
        return None
    if not isinstance(rb, dict) or set(rb) - {"values", "ttl", "marker", "marker_ttl"}:
        raise Untrusted(f"rollback_from is {_show(rb)}, not a snapshot of the record")
    values = None if rb.get("values") is None else _values(rb, "values", rtype)
    ttl = None if rb.get("ttl") is None else _ttl(rb, "ttl")
    marker = rb.get("marker")
    if marker is not None and not (isinstance(marker, list) and len(marker) <= 100 and
                                   all(isinstance(s, str) and len(s) <= 300 for s in marker)):
        raise Untrusted("rollback_from.marker is not a list of TXT strings")
    marker_ttl = None if rb.get("marker_ttl") is None else _ttl(rb, "marker_ttl")
    return Snapshot(values, ttl, None if marker is None else tuple(marker), marker_ttl)


# --- filed under -------------------------------------------------------------------------

Declared = frozenset[tuple[str, str]]   # (absolute name, type) the inventory declares


def admit_journal(j: Journal, *, name: str, zone: str, provider: str, declared: Declared) -> None:
    """The journal read for record `name` of inventory zone `zone` may act (Untrusted if not)."""
    if j.name != name:
        raise Untrusted(f"it is about {_show(j.name)}, but it is filed under {name} (a journal "
                      "acts only on the record it is filed under)")
    if j.zone != origin(zone):
        raise Untrusted(f"it is for zone {_show(j.zone)}, but {name} is in the inventory's zone "
                      f"{origin(zone)}")
    if j.provider != provider:
        raise Untrusted(f"it was written for provider {j.provider}, the zone {origin(zone)} "
                      f"uses {provider}")
    _where(j.name, j.type, zone, declared)


def admit_marker(m: Marker, *, name: str, zone: str, declared: Declared,
                 journal: Journal | None, now: float) -> None:
    """The marker filed at ``_provision-migration.<name>`` may act (Untrusted if not)."""
    if m.type not in MIGRATE_TYPES:
        raise Untrusted(f"it names type {_show(m.type)}: provision migrates only "
                      f"{', '.join(MIGRATE_TYPES)} records")
    if journal is not None and m.type != journal.type:
        raise Untrusted(f"it is about the {m.type} record, the journal of {name} about the "
                      f"{journal.type} record (a marker acts only on the record it is filed under)")
    _where(name, m.type, zone, declared)
    for key, values in (("from", m.original_values), ("to", m.target_values)):
        why = values_problem(m.type, list(values))
        if why:
            raise Untrusted(f"{key}: {why}")
    for key, ttl in (("ttl", m.original_ttl), ("lower", m.lower_ttl)):
        why = ttl_problem(ttl)
        if why:
            raise Untrusted(f"{key}: {why}")
    if m.lower_ttl > m.original_ttl:
        raise Untrusted(f"lower={m.lower_ttl} is above the original ttl={m.original_ttl} (a "
                      "migration never raises a TTL)")
    if not MIN_TIME <= m.started_at <= m.at <= now + 300:
        raise Untrusted("its times are not plausible (started must come before at, both in "
                      "the past)")


def _where(name: str, rtype: str, zone: str, declared: Declared) -> None:
    if not in_zone(name, zone):
        raise Untrusted(f"{name} is outside the inventory's zone {origin(zone)}")
    if name == origin(zone) and (name, rtype) not in declared:
        raise Untrusted(f"it is at the zone apex {name}, where provision touches only records "
                      f"the inventory declares (no {rtype} record is declared there)")


# --- the marker's strings ------------------------------------------------------------------

_SINGLE = ("provision-migration", "phase", "type", "ttl", "lower", "started", "at")
_OPTIONAL = ("by",)   # who opened it (`marker.OPERATOR`), absent in older markers
_MANY = ("from", "to")


def marker_strings_problem(values: tuple[str, ...]) -> str:
    """Why the TXT strings of a migration marker are not ones provision wrote, or "":
    each ``"key=value"`` once (``from``/``to`` repeated), known keys only, TTLs as digits."""
    if len(values) > 2 * 100 + len(_SINGLE):
        return f"{len(values)} strings"
    seen: dict[str, int] = {}
    for v in values:
        s = v.strip()
        if not (len(s) >= 2 and s.startswith('"') and s.endswith('"')) or len(s) > 300:
            return f"the string {_show(v)} is not one quoted key=value"
        if '"' in s[1:-1]:
            return (f"the TXT record {_show(v)} holds several strings (provision writes one "
                    "key=value per TXT record)")
        key, sep, value = s[1:-1].partition("=")
        if not sep or key not in (*_SINGLE, *_OPTIONAL, *_MANY):
            return (f"the string {_show(v)} is not one provision writes (keys: "
                    f"{', '.join((*_SINGLE, *_OPTIONAL, *_MANY))})")
        seen[key] = seen.get(key, 0) + 1
        if key in (*_SINGLE, *_OPTIONAL) and seen[key] > 1:
            return f"the key {key} appears {seen[key]} times"
        if key in ("ttl", "lower") and not (value.isascii() and value.isdigit() and len(value) <= 6):
            return f"{key}={_show(value)} is not a whole number of seconds"
        if printable(value) != value:
            return f"the string {_show(v)} holds control or format characters"
    missing = [k for k in _SINGLE if k not in seen]
    if missing:
        return f"no {', '.join(missing)}"
    return ""
