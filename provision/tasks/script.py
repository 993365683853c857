"""Plain actions -> one POSIX sh script, run in a single remote exec (pure).

The whole script is a function called on its last line, so a script cut short in transit
never runs at all. Each action announces itself on fd 3 (`@step N`) so the executor knows
which one failed; the commands' own output goes to stderr. Files are written to a temp file
in the target directory (`.provision-tmp.XXXXXXXXXX`), given their mode and owner, validated
when asked, then renamed over the target: a killed run never leaves a half-written file,
only a temp file that the next run's probe finds and removes.

A unit that fails to start says why: `systemctl start/restart` that fails, or a started unit
that is no longer active a moment later (a `Type=simple` service whose command exits at
once starts "successfully"), prints the unit's Result and ExecMainStatus and the last
lines of its journal to stderr between `@unit-failed` markers; `unit_failure` parses them.
"""

from __future__ import annotations

import base64
import functools
import posixpath
from importlib.resources import files
from shlex import quote

from provision.facts import TEMP_PREFIX
from provision.facts.users import CREATED_BY
from provision.record import record
from provision.tasks import apt_script, python_env_script
from provision.tasks.actions import (
    Action,
    AptSources,
    AptUpdate,
    DaemonReload,
    EnableUnit,
    EnsureGroup,
    EnsureUser,
    InstallPackages,
    Mkdir,
    RemoveFile,
    RemoveTemps,
    RestartUnit,
    RetireUnit,
    RetireUser,
    SetAttrs,
    StartUnit,
    WriteFile,
)
from provision.tasks.python_env_script import BuildPythonEnv
from provision.tasks.shell import RunCommand
from provision.tasks.users import NOLOGIN

EOF_MARK = "PROVISION_CONTENT_EOF"

# Before any write, chown or chmod as root: no component of the path may be a symlink that
# someone other than root owns. A team member who swaps their ~/.ssh (or a data directory's
# parent) for a link to /etc/sudoers.d must not get root to write or chown there.
SAFE_PATH = r"""provision_safe_path() {
  c=''
  set -f; oldifs=$IFS; IFS=/
  for part in ${1#/}; do
    c="$c/$part"
    if [ -L "$c" ] && [ "$(stat -c %u -- "$c")" != 0 ]; then
      IFS=$oldifs; set +f
      echo "refusing $1: $c is a symlink owned by uid $(stat -c %u -- "$c"), not root" >&2
      return 1
    fi
  done
  IFS=$oldifs; set +f
}"""


# `provision_unit VERB UNIT`: start or restart; on failure print why and fail.
# `provision_settled UNIT...`: after a moment, every unit must still be active (a simple
# service whose command exits at once "starts" fine, then fails or waits to restart).
UNIT_SETTLE_SECONDS = 1
JOURNAL_LINES = 10
UNITS = rf"""provision_unit_why() {{
  echo "@unit-failed	$1	$(systemctl show -p Result --value -- "$1" 2>/dev/null)	$(systemctl show -p ExecMainStatus --value -- "$1" 2>/dev/null)	$(systemctl is-active -- "$1" 2>/dev/null)" >&2
  journalctl -u "$1" -n {JOURNAL_LINES} --no-pager -o short-iso 2>&1 | sed 's/^/@journal	/' >&2
  echo "@unit-failed-end" >&2
}}
provision_unit() {{
  if ! systemctl "$1" -- "$2"; then provision_unit_why "$2"; return 1; fi
}}
provision_settled() {{
  sleep {UNIT_SETTLE_SECONDS}
  for u in "$@"; do
    if ! systemctl -q is-active -- "$u"; then provision_unit_why "$u"; return 1; fi
  done
}}"""


@functools.cache
def _run_lib() -> str:
    return (files("provision._templates") / "steps" / "run.sh").read_text("utf-8")


def _b64(content: str) -> str:
    return base64.encodebytes(content.encode("utf-8", errors="surrogateescape")).decode()


def snippet(action: Action) -> str:
    """Shell lines for one action."""
    a = action
    if isinstance(a, WriteFile):
        d = posixpath.dirname(a.path)
        lines = [
            f"provision_safe_path {quote(a.path)}",
            f"mkdir -p {quote(d)}",
            f"t=$(mktemp {quote(d + '/' + TEMP_PREFIX)}XXXXXXXXXX)",
            f"base64 -d > \"$t\" <<'{EOF_MARK}'",
            _b64(a.content) + EOF_MARK,
            f"chown {quote(a.owner + ':' + a.group)} \"$t\"",
            f"chmod {a.mode:04o} \"$t\"",
        ]
        if a.validate == "visudo":
            lines.append(f"visudo -qcf \"$t\" || {{ rm -f \"$t\"; echo {quote('visudo rejected ' + a.path)}; exit 1; }}")
        lines.append(f"mv -fT \"$t\" {quote(a.path)}")
        return "\n".join(lines)
    if isinstance(a, SetAttrs):
        p = quote(a.path)
        return (f"provision_safe_path {p}\nchown -h {quote(a.owner + ':' + a.group)} {p}\n"
                f"chmod {a.mode:04o} {p}")
    if isinstance(a, RemoveFile):
        return f"provision_safe_path {quote(a.path)}\nrm -f {quote(a.path)}"
    if isinstance(a, RemoveTemps):
        return "rm -f " + " ".join(quote(p) for p in a.paths)
    if isinstance(a, Mkdir):
        p = quote(a.path)
        return (f"provision_safe_path {p}\nmkdir -p {p}\nprovision_safe_path {p}\n"
                f"chown -h {quote(a.owner + ':' + a.group)} {p}\nchmod {a.mode:04o} {p}")
    if isinstance(a, EnsureUser):
        if a.create:
            return (f"useradd -m -U -c {quote(CREATED_BY)} -d {quote(a.home)} -s {quote(a.shell)} "
                    f"{quote(a.name)}")
        return f"usermod -s {quote(a.shell)} -e '' {quote(a.name)}"
    if isinstance(a, RetireUser):
        return f"usermod -e 1 -s {NOLOGIN} {quote(a.name)}"
    if isinstance(a, InstallPackages):
        return apt_script.install(a)
    if isinstance(a, AptUpdate):
        return apt_script.update(a)
    if isinstance(a, AptSources):
        return apt_script.sources(a)
    if isinstance(a, DaemonReload):
        return "systemctl daemon-reload"
    if isinstance(a, EnableUnit):
        return f"systemctl enable -q --no-reload {quote(a.unit)}"
    if isinstance(a, StartUnit):
        return f"provision_unit start {quote(a.unit)}"
    if isinstance(a, RestartUnit):
        return f"provision_unit restart {quote(a.unit)}"
    if isinstance(a, RetireUnit):
        return f"systemctl disable -q --now -- {quote(a.unit)}"
    if isinstance(a, EnsureGroup):
        lines = [f"groupadd -f -- {quote(a.name)}"] if a.create else []
        lines += [f"usermod -aG {quote(a.name)} -- {quote(u)}" for u in a.add]
        lines += [f"gpasswd -d {quote(u)} {quote(a.name)} >/dev/null" for u in a.remove]
        return "\n".join(lines) or "true"
    if isinstance(a, RunCommand):
        return " ".join(["provision_run", *(quote(x or "") for x in
                                            (a.user, a.creates, a.unless, a.command))])
    if isinstance(a, BuildPythonEnv):
        return python_env_script.snippet(a)
    raise TypeError(f"no shell for {a!r}")


def build(actions: list[Action]) -> str:
    """The whole batch. Exit status 0 and a final `@done` when every action ran."""
    body = []
    started = [a.unit for a in actions if isinstance(a, StartUnit | RestartUnit)]
    last_unit = max((i for i, a in enumerate(actions) if isinstance(a, StartUnit | RestartUnit)),
                    default=-1)
    for i, a in enumerate(actions):
        body.append(f"printf '@step\\t{i}\\n' >&3")
        body.append(snippet(a))
        if i == last_unit:  # checked once, after the last start: one pause per batch
            body.append("provision_settled " + " ".join(quote(u) for u in dict.fromkeys(started)))
    return "\n".join([
        "provision_apply() {",
        "set -eu",
        "umask 022",
        SAFE_PATH,
        UNITS,
        *([apt_script.LIB] if any(isinstance(a, InstallPackages | AptUpdate | AptSources)
                                  for a in actions) else []),
        *([_run_lib()] if any(isinstance(a, RunCommand) for a in actions) else []),
        *([python_env_script.lib()] if any(isinstance(a, BuildPythonEnv) for a in actions) else []),
        "exec 3>&1 1>&2",
        *body,
        "printf '@done\\n' >&3",
        "}",
        "provision_apply",
        "",
    ])


def parse_progress(stdout: str) -> tuple[int, bool]:
    """(index of the last action started, or -1; whether the batch finished)."""
    last, done = -1, False
    for line in stdout.splitlines():
        if line.startswith("@step\t"):
            last = int(line.split("\t", 1)[1])
        elif line == "@done":
            done = True
    return last, done


@record
class UnitFailure:
    """Why a unit did not start: what systemd says and the last lines of its journal."""

    unit: str
    result: str
    exec_main_status: str
    state: str
    journal: tuple[str, ...]

    def summary(self, lines: int = 3) -> str:
        tail = [j for j in self.journal if j.strip() and not j.startswith("-- ")][-lines:]
        head = (f"{self.unit} did not start (result {self.result or '?'}, exit status "
                f"{self.exec_main_status or '?'}, now {self.state or '?'})")
        return head + (": journal: " + " / ".join(tail) if tail else "")

    def to_json(self) -> dict[str, object]:
        return {"unit": self.unit, "result": self.result,
                "exec_main_status": self.exec_main_status, "state": self.state,
                "journal": list(self.journal)}


def unit_failure(stderr: str) -> UnitFailure | None:
    """The first `@unit-failed` block in a batch's stderr, or None."""
    block: list[str] | None = None
    head: list[str] = []
    for line in stderr.splitlines():
        if line.startswith("@unit-failed\t") and block is None:
            head, block = line.split("\t")[1:], []
        elif line == "@unit-failed-end" and block is not None:
            break
        elif block is not None and line.startswith("@journal\t"):
            block.append(line.split("\t", 1)[1])
    if block is None:
        return None
    head += [""] * (4 - len(head))
    return UnitFailure(head[0], head[1], head[2], head[3], tuple(block))


def without_markers(stderr: str) -> str:
    """stderr without the `@unit-failed` blocks (what the commands themselves said)."""
    out, inside = [], False
    for line in stderr.splitlines():
        if line.startswith("@unit-failed\t"):
            inside = True
        elif line == "@unit-failed-end":
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)
