"""One plan format for every command that plans: `plan`, `sg plan`, `dns plan`.

Pure data plus printing (stdout only). A plan is a list of sections (a host, a security
group, a zone), each with Terraform-like changes: `+` create, `-` destroy, `~` update in
place, optionally with detail lines and a unified diff. Every plan ends with the same
count line and exits the same way (`--detailed-exitcode`: 0 no changes, 3 changes; 1 when a
section failed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from rich.console import Console
from rich.text import Text

from provision.errors import EXIT_CHANGES, EXIT_FAILED, EXIT_OK
from provision.frozen import frozen
from provision.headline import plan_line
from provision.text import printable as p

from .common import console

Op = Literal["+", "-", "~"]
_WORD = {"+": "add", "~": "change", "-": "destroy"}
_STYLE = {"+": "green", "-": "red", "~": "yellow"}


@frozen
class Change:
    op: Op
    subject: str  # what changes, one line ("ingress tcp 22 from 203.0.113.0/24")
    detail: tuple[str, ...] = ()  # further lines ("ttl: 3600 -> 60")
    diff: tuple[str, ...] = ()  # unified diff lines of a file, printed coloured
    kind: str = ""  # the producer's own type name (an action class, "rule", "rrset")

    def to_json(self) -> dict[str, object]:
        return {"op": self.op, "action": _WORD[self.op], "subject": self.subject,
                "detail": list(self.detail), "type": self.kind}


@frozen
class Section:
    """The changes for one thing (host, group, zone), or why it could not be planned."""

    name: str
    changes: tuple[Change, ...] = ()
    error: str = ""  # failed/unreachable: no changes could be planned
    status: str = ""  # free-form status word shown with an error ("unreachable")
    notes: tuple[str, ...] = ()  # drift reported but not acted on, warnings
    info: tuple[str, ...] = ()  # what the host is, one line each (its GPUs)
    aside: bool = False  # notes on the whole plan, not a thing planned: not counted

    @property
    def failed(self) -> bool:
        return bool(self.error)


def counts(sections: Iterable[Section]) -> dict[str, int]:
    out = {"add": 0, "change": 0, "destroy": 0}
    for s in sections:
        for c in s.changes:
            out[_WORD[c.op]] += 1
    return out


def count_line(sections: Sequence[Section], noun: str = "host") -> str:
    """The last line: the changes, and first what could not be planned (`noun`: what a
    section is, "host", "zone")."""
    planned = [s for s in sections if not s.aside]
    return plan_line(counts(planned), [s.status or "failed" for s in planned if s.failed],
                     len(planned), noun)


def has_changes(sections: Iterable[Section]) -> bool:
    return any(s.changes for s in sections)


def exit_status(sections: Sequence[Section], detailed_exitcode: bool) -> int:
    if any(s.failed for s in sections):
        return EXIT_FAILED
    if detailed_exitcode and has_changes(sections):
        return EXIT_CHANGES
    return EXIT_OK


def to_json(sections: Sequence[Section]) -> dict[str, object]:
    return {"summary": counts(sections),
            "sections": [{"name": s.name, "error": s.error or None, "status": s.status or None,
                          "notes": list(s.notes), "info": list(s.info), "changes": [c.to_json() for c in s.changes]}
                         for s in sections]}


def print_plan(sections: Sequence[Section], out: Console | None = None, *, title: str = "",
               noun: str = "host") -> None:
    """Print the sections and the count line (`noun`: what a section is) on a rich Console
    (stdout by default). Every
    name, subject, detail, note, error and diff line came from outside (the inventory, a
    host's files, a zone, a provider): each goes through `printable`, into a Text."""
    out = out or console()
    if title:
        out.print(Text(p(title), style="bold"))
    for s in sections:
        if s.failed:
            out.print(Text(f"{p(s.name)}: {p(s.status or 'failed')}: {p(s.error)}", style="bold red"))
            continue
        if not s.changes:
            out.print(Text(f"{p(s.name)}: no changes", style="green"))
        else:
            n = len(s.changes)
            out.print(Text(f"{p(s.name)}: {n} change{'s' if n != 1 else ''}", style="bold yellow"))
        for line in s.info:
            out.print(Text(f"  {p(line)}", style="dim"))
        for c in s.changes:
            for line in c.diff:
                out.print(_diff_line(line))
        for c in s.changes:
            out.print(Text(f"  {c.op} ", style=f"bold {_STYLE[c.op]}") + Text(p(c.subject)))
            for d in c.detail:
                out.print(Text(f"      {p(d)}", style="dim"))
        for note in s.notes:
            out.print(Text(f"  ! {p(note)}", style="magenta"))
    out.print(Text(count_line(sections, noun), style="bold"))


def _diff_line(line: str) -> Text:
    text = p(line.rstrip("\n"))  # a host's file: its old content is the host's
    if line.startswith(("+++", "---")):
        return Text(text, style="bold")
    if line.startswith("@@"):
        return Text(text, style="cyan")
    if line.startswith("+"):
        return Text(text, style="green")
    if line.startswith("-"):
        return Text(text, style="red")
    return Text(text)
