"""What Ctrl-C says during `sg apply` (pure words over `provision.cloud.apply.Progress`;
the handler is `provision.interrupt`'s).

Each change is one or a few AWS calls, each taken whole or not at all: the first Ctrl-C
lets the change in flight finish (groups being created are deleted again; what was sent
and touched SSH is still confirmed or reverted) and starts no other; the second leaves at
once, saying what the change in flight may have left half-way.
"""

from __future__ import annotations

from provision.cloud.apply import Progress, Unit
from provision.text import printable

_HALF = {
    "placement": "one CreatePlacementGroup call: the placement group exists or it does not",
    "create": "groups created so far stay, empty and tagged managed-by: provision (no rule "
              "was sent); the next sg apply uses them",
    "revoke": "AWS takes each revoke call on its own: some of the group's revokes may be "
              "sent, the rest not",
    "rules": "AWS takes each revoke and authorize call on its own: some of the group's rule "
             "changes may be sent, the rest not",
    "attach": "one call sets the instance's groups: it has its old groups or its new ones",
    "confirm": "the change that touched SSH is neither confirmed nor reverted: check that a new "
               "SSH login gets through",
    "delete": "one DeleteSecurityGroup call: the group is gone or still there",
}


def _n(k: int, what: str = "change") -> str:
    return f"{k} {what}{'s' if k != 1 else ''}"


def _names(units: list[Unit]) -> str:
    return ", ".join(printable(u.text) for u in units)


def stopping_line(p: Progress) -> str:
    """What the first Ctrl-C says at once."""
    busy = f"1 change finishing ({printable(p.current.text)})" if p.current else "no change in flight"
    return (f"stopping: {busy}, {_n(len(p.waiting))} not started "
            "(Ctrl-C again to leave at once)")


def leaving_lines(p: Progress) -> list[str]:
    """What the second Ctrl-C says before the process ends."""
    if p.current is None:
        return ["leaving now: no change was being made; `provision sg plan` shows what is left"]
    return ["leaving now; what may be half-way:",
            f"  {printable(p.current.text)}: {_HALF[p.current.kind]}; `provision sg plan` shows "
            "what AWS holds"]


def interrupted_line(p: Progress) -> str:
    """The recap after the first Ctrl-C: what was changed (a failed rollback included),
    rolled back, not applied, and what an instance admits beyond both the state before and
    the declared one (read back)."""
    changed = [printable(u.text) for u in p.done] + [printable(t) for t in p.left]
    parts = [f"changed: {', '.join(changed)}" if changed else "nothing changed"]
    if p.rolled_back:
        parts.append(f"rolled back: {', '.join(map(printable, p.rolled_back))}")
    if p.not_applied:
        parts.append(f"not applied: {_names(p.not_applied)}")
    if p.wider:
        parts.append("now admitting more than before and than declared: "
                     + "; ".join(map(printable, p.wider)))
    again = "; run sg apply again to finish" if p.not_applied or p.rolled_back or p.left else ""
    return f"interrupted (Ctrl-C): {'; '.join(parts)}{again}"
