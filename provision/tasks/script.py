"""Plain actions -> one POSIX sh script, run in a single remote exec (pure).

The whole script is a function called on its last line, so a script cut short in transit
never runs at all. Each action announces itself on fd 3 (`@step N`) so the executor knows
which one failed; the commands' own output goes to stderr. Files are written to a temp file
in the target directory (`.provision-tmp.XXXXXXXXXX`), given their mode and owner, validated
when asked, then renamed over the target: a killed run never leaves a half-written file,
only a temp file that the next run's probe finds and removes.
"""

from __future__ import annotations

import base64
import posixpath
from shlex import quote

from provision.facts import TEMP_PREFIX
from provision.facts.users import CREATED_BY
from provision.tasks.actions import (
    Action,
    DaemonReload,
    EnableUnit,
    EnsureUser,
    InstallPackages,
    Mkdir,
    RemoveFile,
    RemoveTemps,
    RestartUnit,
    RetireUser,
    SetAttrs,
    StartUnit,
    WriteFile,
)
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
        return ("DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                "-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold -- "
                + " ".join(quote(n) for n in a.names))
    if isinstance(a, DaemonReload):
        return "systemctl daemon-reload"
    if isinstance(a, EnableUnit):
        return f"systemctl enable -q {quote(a.unit)}"
    if isinstance(a, StartUnit):
        return f"systemctl start {quote(a.unit)}"
    if isinstance(a, RestartUnit):
        return f"systemctl restart {quote(a.unit)}"
    raise TypeError(f"no shell for {a!r}")


def build(actions: list[Action]) -> str:
    """The whole batch. Exit status 0 and a final `@done` when every action ran."""
    body = []
    for i, a in enumerate(actions):
        body.append(f"printf '@step\\t{i}\\n' >&3")
        body.append(snippet(a))
    return "\n".join([
        "provision_apply() {",
        "set -eu",
        "umask 022",
        SAFE_PATH,
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
