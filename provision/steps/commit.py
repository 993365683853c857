"""Commit-confirmed changes (firewall, sshd) as plain data and the scripts that carry them out.

Pure: the action a step plans, and the POSIX sh scripts rendered from
`templates/commit-confirmed-*.sh.j2` for one attempt (an id and a timeout chosen by the
shell layer, `provision.hosts.confirm`). The protocol, like Juniper's `commit confirmed`
and Ansible's `iptables_state`:

1. apply script (the existing session): stage the files, validate them on the host
   (`iptables-restore --test --noflush`, `sshd -t -f <temp full config>`), back up the
   files and the live rules, arm `systemd-run --on-active=T --timer-property=AccuracySec=100ms
   --unit=provision-rollback-<id>` running the rollback script, install atomically, apply;
2. confirm script over a NEW connection through the whole jump chain: removes the marker
   and stops the timer; the rollback script renames the same marker first, so exactly one
   of them wins;
3. no confirmation within T: the host restores the backup by itself; the status script
   reports how long that took (host clock, arm -> restored).
"""

from __future__ import annotations

import base64
import posixpath
import re
from dataclasses import field
from typing import Any, Literal

from provision.frozen import frozen
from provision.render import SSHD_DROPIN
from provision.render.env import render as _render

from .action import Described, FileChange
from .actions import WriteFile

STATE_DIR = "/var/lib/provision/commit"
ROLLBACK_UNIT_PREFIX = "provision-rollback-"  # + commit id: the transient rollback unit
ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
Kind = Literal["sshd", "firewall"]
SSHD = "/usr/sbin/sshd"
RESTORE = {4: "iptables-restore", 6: "ip6tables-restore"}
# the rules files `iptables-restore --test --noflush` checks before anything changes
TESTED_KINDS = {"iptables-v4": 4, "iptables-v6": 6, "iptables-docker-v4": 4, "iptables-docker-v6": 6}


@frozen
class Staged:
    """One file of a commit-confirmed change, with its rendered kind (see provision.render)."""

    write: WriteFile
    kind: str
    changed: bool = True
    remove: bool = False  # remove the file instead (backed up and restored like the others)


@frozen
class CommitConfirmed(Described):
    """Install `files` and apply them with a rollback armed on the host, then confirm over
    a new connection. `unit`: the firewall loader unit, or sshd's unit (reloaded)."""

    kind: Kind
    host: str
    files: tuple[Staged, ...]
    unit: str
    script: str = ""  # firewall: the loader script run by the apply step
    reasons: tuple[str, ...] = field(default=())
    # sshd: after the reload, `sshd -T` once per entry ("": plain, else a `-C` spec), read
    # back by `provision.steps.verify`
    checks: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        changed = [("remove " if s.remove else "") + s.write.path for s in self.files if s.changed]
        what = ", ".join(changed) if changed else "no file changes"
        why = f"; {'; '.join(self.reasons)}" if self.reasons else ""
        return f"{self.kind}: commit-confirmed apply ({what}{why}), rollback armed on the host"

    @property
    def writes(self) -> tuple[WriteFile, ...]:
        """Changed files, for the plan's diffs."""
        return tuple(s.write for s in self.files if s.changed and not s.remove)

    def plan_files(self) -> tuple[FileChange, ...]:
        return tuple(f for w in self.writes for f in w.plan_files())


def check_id(commit_id: str) -> str:
    if not ID_RE.match(commit_id):
        raise ValueError(f"bad commit id {commit_id!r}")
    return commit_id


def state_dir(commit_id: str) -> str:
    return f"{STATE_DIR}/{check_id(commit_id)}"


def rollback_unit(commit_id: str) -> str:
    """The transient unit `systemd-run` arms the rollback as (`.timer` and `.service`)."""
    return f"{ROLLBACK_UNIT_PREFIX}{check_id(commit_id)}"




def _b64(text: str) -> str:
    return base64.encodebytes(text.encode("utf-8", errors="surrogateescape")).decode()


def _context(action: CommitConfirmed, commit_id: str) -> dict[str, Any]:
    fs = [{"path": s.write.path, "dirname": posixpath.dirname(s.write.path),
           "mode": f"{s.write.mode:04o}", "owner": s.write.owner, "group": s.write.group,
           "b64": _b64(s.write.content), "kind": s.kind, "remove": s.remove}
          for s in action.files]
    tests = [{"index": i, "restore": RESTORE[TESTED_KINDS[s.kind]], "path": s.write.path}
             for i, s in enumerate(action.files) if s.kind in TESTED_KINDS]
    return {"kind": action.kind, "host": action.host, "id": check_id(commit_id),
            "dir": state_dir(commit_id), "rollback_unit": rollback_unit(commit_id), "files": fs, "tests": tests, "unit": action.unit,
            "script": action.script, "sshd": SSHD, "checks": list(action.checks), "dropin": SSHD_DROPIN,
            "dropin_dir": posixpath.dirname(SSHD_DROPIN),
            "dropin_name": posixpath.basename(SSHD_DROPIN)}


def rollback_script(action: CommitConfirmed, commit_id: str) -> str:
    return _render("commit-confirmed-rollback.sh.j2", **_context(action, commit_id))


def apply_script(action: CommitConfirmed, commit_id: str, timeout: int,
                 earlier: tuple[str, ...] = ()) -> str:
    """`earlier`: the commit ids armed before this one in the same exec, whose windows move
    to this one's end too."""
    if timeout < 1:
        raise ValueError("the confirmation timeout must be at least 1 s")
    if action.kind == "sshd" and ([s.kind for s in action.files if not s.remove] != ["sshd"]
                                  or any(s.kind != "sshd-old" for s in action.files if s.remove)):
        raise ValueError("an sshd commit carries exactly the sshd drop-in (and removes old ones)")
    return _render("commit-confirmed-apply.sh.j2", timeout=int(timeout),
                   rollback_b64=_b64(rollback_script(action, commit_id)),
                   earlier=[state_dir(check_id(e)) for e in earlier],
                   **_context(action, commit_id))


def confirm_script(action: CommitConfirmed, commit_id: str) -> str:
    return _render("commit-confirmed-confirm.sh.j2", **_context(action, commit_id))


def status_script(action: CommitConfirmed, commit_id: str, wait: float = 10.0) -> str:
    return _render("commit-confirmed-status.sh.j2", wait_tenths=max(0, int(wait * 10)),
                   **_context(action, commit_id))


def rollback_now_script(action: CommitConfirmed, commit_id: str) -> str:
    """Roll back at once (a change that does not take effect), then the status report."""
    return _render("commit-confirmed-rollback-now.sh.j2", wait_tenths=0,
                   **_context(action, commit_id))


def combined(parts: list[str], *, batch: str | None = None, stop_on_error: bool,
             what: str) -> str:
    """Several scripts as one exec (see templates/commit-confirmed-all.sh.j2)."""
    return _render("commit-confirmed-all.sh.j2", parts=parts, batch=batch,
                   stop_on_error=stop_on_error, what=what)


def split_sections(stdout: str) -> tuple[str, list[str]]:
    """(what came before the first `@commit` line, then each part's output in order)."""
    head: list[str] = []
    parts: list[list[str]] = []
    for line in stdout.splitlines():
        if line.startswith("@commit\t"):
            parts.append([])
        elif parts:
            parts[-1].append(line)
        else:
            head.append(line)
    return "\n".join(head), ["\n".join(p) for p in parts]


# --- parsing the scripts' answers ---------------------------------------------------------

@frozen
class ApplyResult:
    invalid: bool = False
    armed: bool = False
    applied: bool = False
    failed: bool = False
    armed_at: float | None = None
    message: str = ""
    applied_at: float | None = None
    settled_at: float | None = None  # when the window began (templates: 8. settle)
    # read back after applying: sshd -T output per check index; iptables-save per family
    effective: dict[int, tuple[str, ...]] = field(default_factory=dict)
    saves: dict[int, str] = field(default_factory=dict)


def confirm_window(timeout: float, results: list[ApplyResult]) -> float:
    """Seconds left for the confirmation when the apply exec returns. The host moved every
    armed commit's deadline to the last settle plus the timeout (in whole seconds: one is
    kept back), so what passed before it, however slow, does not count; what the host's
    clock says passed after it (a later commit that failed and rolled back) does. Without a
    settle (a commit cut short), the timeout less the time from the first arming."""
    live = [r for r in results if r.armed and r.applied and not r.failed]
    stamps = [t for r in results for t in (r.armed_at, r.applied_at, r.settled_at) if t is not None]
    settled = [r.settled_at for r in live if r.settled_at is not None]
    if settled and len(settled) == len(live):
        return max(0.0, timeout - 1.0 - max(0.0, max(stamps) - max(settled)))
    armed = [r.armed_at for r in results if r.armed_at is not None]
    spent = max(stamps) - min(armed) if armed and stamps else 0.0
    return max(0.0, timeout - max(0.0, spent))


def parse_apply(stdout: str) -> ApplyResult:
    invalid = armed = applied = failed = False
    armed_at: float | None = None
    applied_at: float | None = None
    settled_at: float | None = None
    message: list[str] = []
    effective: dict[int, list[str]] = {}
    saves: dict[int, list[str]] = {}
    for line in stdout.splitlines():
        if line.startswith("@sshdt\t"):
            _, idx, rest = ([*line.split("\t", 2), "", ""])[:3]
            if idx.isdigit():
                effective.setdefault(int(idx), []).append(rest)
        elif line.startswith(("@ipt4\t", "@ipt6\t")):
            saves.setdefault(int(line[4]), []).append(line[6:])
        elif line == "@invalid":
            invalid = True
        elif line == "@armed":
            armed = True
        elif line.startswith("@armed-at "):
            armed_at = _float(line.split(" ", 1)[1])
        elif line == "@applied":
            applied = True
        elif line.startswith("@applied-at "):
            applied_at = _float(line.split(" ", 1)[1])
        elif line.startswith("@settled-at "):
            settled_at = _float(line.split(" ", 1)[1])
        elif line == "@apply-failed":
            failed = True
        elif line.strip():
            message.append(line.strip())
    return ApplyResult(invalid, armed, applied, failed, armed_at, " / ".join(message), applied_at,
                       settled_at, {k: tuple(v) for k, v in effective.items()},
                       {k: "\n".join(v) for k, v in saves.items()})


def _float(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


@frozen
class Status:
    result: str  # rolled-back | pending | unknown | confirmed | ""
    armed_at: float | None = None
    restored_at: float | None = None
    log: tuple[str, ...] = ()

    @property
    def started_at(self) -> float | None:
        """When the timer fired (the rollback script's first log line)."""
        for line in self.log:
            if line.startswith("rollback started "):
                return _float(line.rsplit(" ", 1)[1])
        return None

    @property
    def fired_seconds(self) -> float | None:
        if self.armed_at is None or self.started_at is None:
            return None
        return self.started_at - self.armed_at

    @property
    def rollback_seconds(self) -> float | None:
        if self.armed_at is None or self.restored_at is None:
            return None
        return self.restored_at - self.armed_at


def parse_status(stdout: str) -> Status:
    result, armed, restored, log = "", None, None, []
    for line in stdout.splitlines():
        tag, _, rest = line.partition(" ")
        if tag == "@result":
            result = rest.strip()
        elif tag == "@armed-at":
            armed = _float(rest)
        elif tag == "@restored-at":
            restored = _float(rest)
        elif tag == "@log":
            log.append(rest)
    return Status(result, armed, restored, tuple(log))


def confirmed(stdout: str) -> bool | None:
    """True: confirmed in time; False: the host was already rolling back; None: no answer."""
    lines = stdout.splitlines()
    if "@confirmed" in lines:
        return True
    if "@too-late" in lines:
        return False
    return None


def missed_outcome(kind: Kind, timeout: int, status: Status, cause: str) -> tuple[bool, str]:
    """What became of a commit whose confirmation we did not see in time: (kept, text).

    A confirmation connection abandoned at the deadline may still get through and confirm
    before the host's timer fires; the host then keeps the change (the status script finds
    the commit confirmed) and the recap must say so, not claim a rollback."""
    if status.result == "confirmed":
        return True, (f"{kind}: confirmed after the {timeout} s window by a connection that was "
                      "still on its way; the change stays")
    return False, rollback_reason(kind, timeout, status, cause)


def rollback_reason(kind: Kind, timeout: int, status: Status, cause: str) -> str:
    """The recap's text for a change the host rolled back on its own."""
    what = "rules" if kind == "firewall" else "sshd config"
    head = f"{kind}: confirmation over a new connection did not arrive within {timeout} s"
    if status.result == "rolled-back":
        took, fired = status.rollback_seconds, status.fired_seconds
        tail = f"; previous {what} restored" + (
            f" by the host {took:.1f} s after arming" if took is not None else "") + (
            f" (timer fired at {fired:.1f} s)" if fired is not None else "")
    elif status.result == "pending":
        tail = f"; the host has not rolled back yet (still armed); previous {what} due soon"
    else:
        tail = f"; the host restores the previous {what} on its own (could not read its status)"
    return head + tail + (f" ({cause})" if cause else "")
