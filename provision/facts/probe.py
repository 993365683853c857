"""The one probe per host: the requested facts' fragments as one POSIX sh script, and the
parse of its answer into `Facts`. Pure: reads the fragments from the templates package,
runs nothing (the shell layer, `provision.hosts.gather`, sends it over SSH).

The script is a function called on its last line, so a script cut short in transit never
runs. Its answer starts with `probe<TAB>1`, ends with `end`, and holds one record per line
(`kind<TAB>fields...`); each record goes to the spec that owns its kind.
"""

from __future__ import annotations

import functools
import shlex
from importlib.resources import files
from typing import Any

from provision.text import printable, unsafe

from .registry import BY_NAME, SPECS
from .result import Facts
from .spec import FactsError, Rec, Request

HEADER = "probe\t1"


@functools.cache
def _fragment(name: str) -> str:
    return (files("provision._templates") / "facts" / f"{name}.sh").read_text("utf-8")


@functools.cache
def _paths() -> str:
    """Who may read what (templates/territory.sh), and the path readers, whose text is also
    handed to an account's own sh for the paths in its directories (lib.sh `fact_at`)."""
    territory = (files("provision._templates") / "territory.sh").read_text("utf-8")
    return f"{territory}\nFACT_PATHS={shlex.quote(_fragment('paths'))}\neval \"$FACT_PATHS\""


def probe_script(request: Request | None = None) -> str:
    """The script for `request` (None: every known fact). Run as `sh -s -- ARGS`."""
    wanted = {s.name for s in SPECS} if request is None else request.spec_names()
    unknown = wanted - set(BY_NAME)
    if unknown:
        raise ValueError(f"unknown facts: {', '.join(sorted(unknown))}")
    specs = [s for s in SPECS if s.name in wanted]
    return "\n".join([
        "# provision facts probe (POSIX sh): one round trip, one record per line.",
        "probe_main() {",
        "LC_ALL=C; export LC_ALL",
        "T=$(printf '\\t')",
        f"printf '{HEADER.replace(chr(9), chr(92) + 't')}\\n'",
        _paths(),
        _fragment("lib"),
        *(_fragment(s.name) for s in specs),
        *(f'fact_{s.name} "$@"' for s in specs),
        "printf 'end\\n'",
        "}",
        'probe_main "$@"',
        "",
    ])


# The host's answer is outside data: bounded before it is parsed, and checked as text.
MAX_ANSWER_CHARS = 32 * 1024 * 1024
MAX_LINE_CHARS = 256 * 1024  # a file record carries at most 64 KiB of content, in base64
MAX_RECORDS = 200_000
# Records whose text any local user (or a container) chooses and that only describe the
# host: process and container names (`ss`, `docker ps`), the OS and GPU names. Unsafe
# characters in them are escaped at parse time, so a user who names a process
# "\x1b]52;c;…" changes nothing but that process's name in the report. Every other record
# drives a decision (files, users, units, packages, rules, sshd settings): an unsafe
# character there refuses the whole answer.
DESCRIPTIVE = frozenset({"ltcp", "ludp", "listen", "dockerps", "closewait", "os",
                         # nvidia-smi's rows and messages (provision.facts.gpus): a row with
                         # an escaped character is no row, and a message only describes
                         "gpuline", "gpukmod"})


def _text_checked(n: int, kind: str, rest: str) -> str:
    bad = unsafe(rest.replace("\t", " "))
    if bad is None:
        return rest
    if kind in DESCRIPTIVE:
        return "\t".join(printable(f) for f in rest.split("\t"))
    raise FactsError(f"line {n}: the host's answer holds the character {printable(bad)!r} in "
                     f"a {printable(kind)!r} record (control, format and invisible characters "
                     "are refused: provision does not act on such output)")


def parse(text: str) -> Facts:
    """Parse the probe's answer. Raises FactsError when it is truncated, malformed, too
    large, or holds unsafe characters where decisions are made (see DESCRIPTIVE)."""
    if len(text) > MAX_ANSWER_CHARS:
        raise FactsError(f"the probe's answer is too large ({len(text):,} characters; at most "
                         f"{MAX_ANSWER_CHARS:,})")
    lines = text.split("\n")
    if not lines or lines[0] != HEADER:
        raise FactsError("not a provision probe answer (first line should be 'probe\\t1')")
    owner = {kind: s.name for s in SPECS for kind in s.kinds}
    records: dict[str, list[Rec]] = {s.name: [] for s in SPECS}
    ended = False
    count = 0
    for n, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        kind, _, rest = line.partition("\t")
        if kind == "end":
            ended = True
            break
        name = owner.get(kind)
        if name is None:  # unknown kinds are ignored: a newer probe may say more
            continue
        count += 1
        if count > MAX_RECORDS or len(line) > MAX_LINE_CHARS:
            raise FactsError(f"line {n}: the probe's answer exceeds its limits (at most "
                             f"{MAX_RECORDS:,} records of {MAX_LINE_CHARS:,} characters)")
        rest = _text_checked(n, kind, rest)
        records[name].append(Rec(n, kind, tuple(rest.split("\t")), rest))
    if not ended:
        raise FactsError("the probe's answer is truncated (no 'end' record)")
    values: dict[str, Any] = {}
    for s in SPECS:
        try:
            values[s.name] = s.parse(records[s.name])
        except FactsError:
            raise
        except (ValueError, TypeError, IndexError, KeyError, OverflowError, RecursionError) as e:
            # a parser met a shape it does not know: the host's answer, not a crash
            raise FactsError(f"the probe's {s.name} records are malformed "
                             f"({printable(type(e).__name__)}: {printable(str(e))[:200]})") from None
    return Facts(values)
