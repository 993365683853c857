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
A unit whose ports are known is settled as soon as it listens on them itself, not after the
whole pause; each unit's settling is reported on fd 3 (`@settled UNIT early|late`), which
the progress parser passes over.
"""

from __future__ import annotations

import functools
from importlib.resources import files
from shlex import quote

from provision.frozen import frozen
from provision.steps.action import Action, Lib

# Before root acts by name on a path: the path must be root's alone (templates/territory.sh):
# a team member who swaps their ~/.ssh (or a data directory's parent) for a link to
# /etc/sudoers.d must not get root to write or chown there.
SAFE_PATH = r"""provision_safe_path() {
  # the directory PATH is in: a name there is root's alone to swap
  case $(provision_whose "$(provision_dir_of "$1")") in
    root\ *) return 0 ;;
    '') return 1 ;;
    *) echo "refusing $1: it lies in another account's directory" >&2; return 1 ;;
  esac
}"""


# `provision_unit VERB UNIT`: start or restart; on failure print why and fail.
# `provision_settled UNIT[=PORT,...]...`: every unit started must still be active after a
# moment (a simple service whose command exits at once "starts" fine, then fails or waits to
# restart). A unit whose every port listens, each listening socket held by a process in the
# unit's own cgroup, and which is active, is settled at once: polled every 50 ms for up to
# the settle time, so a server that listens quickly does not cost the whole pause. A port
# held by someone else (the unit's server then fails to bind) is not the unit listening;
# a unit without ports, or without `ss` on the host, gets the pause and the check. Each unit
# is reported on fd 3: `@settled UNIT early|late`.
UNIT_SETTLE_SECONDS = 1
# A unit with ports is given this long to listen on them itself before the plain check: a
# server that cannot bind (another account holds its port) fails within it, and says why,
# instead of after the batch reported it started.
UNIT_LISTEN_SECONDS = 20
SETTLE_POLL_SECONDS = 0.05
JOURNAL_LINES = 10
UNITS = rf"""provision_unit_why() {{
  echo "@unit-failed	$1	$(systemctl show -p Result --value -- "$1" 2>/dev/null)	$(systemctl show -p ExecMainStatus --value -- "$1" 2>/dev/null)	$(systemctl is-active -- "$1" 2>/dev/null)	${{2:-}}" >&2
  journalctl -u "$1" -n {JOURNAL_LINES} --no-pager -o short-iso 2>&1 | sed 's/^/@journal	/' >&2
  echo "@unit-failed-end" >&2
}}
provision_unit() {{
  if ! systemctl "$1" -- "$2"; then provision_unit_why "$2"; return 1; fi
}}"""
# Reads $provision_ss (`ss -Hltnp`): every port of $P listens, and every pid on those
# sockets has a cgroup line ending in /$U (a socket without a pid, i.e. not ours to see,
# does not count). Kept out of the f-string: awk's braces.
SETTLE = r"""provision_ms() {
  echo $(( $(date +%s%N) / 1000000 ))
}
provision_owned() {
  provision_out=$(printf '%s\n' "$provision_ss" | U="/$1" P=",$2," awk '
    function mine(pid,   f, line, yes, u) {
      f = "/proc/" pid "/cgroup"; u = ENVIRON["U"]; yes = 0
      while ((getline line < f) > 0)
        if (length(line) >= length(u) && substr(line, length(line) - length(u) + 1) == u) yes = 1
      close(f)
      return yes
    }
    {
      port = $4; sub(/.*:/, "", port)
      if (index(ENVIRON["P"], "," port ",") == 0) next
      s = $0; pids = 0
      while (match(s, /pid=[0-9]+/)) {
        pids++
        pid = substr(s, RSTART + 4, RLENGTH - 4)
        if (!mine(pid)) { bad = 1; print "foreign", port, pid }
        s = substr(s, RSTART + RLENGTH)
      }
      if (!pids) bad = 1
      seen[port] = 1
    }
    END {
      n = split(ENVIRON["P"], want, ",")
      for (i = 1; i <= n; i++) if (want[i] != "" && !(want[i] in seen)) bad = 1
      print bad ? "bad" : "ok"
    }')
  # a port of the unit held by a process outside it: the unit's server cannot bind there
  # (another account squats it); said in $provision_squat, status 2
  provision_squat=''
  while read -r provision_k provision_port provision_pid; do
    [ "$provision_k" = foreign ] || continue
    provision_puid=$(awk '$1 == "Uid:" { print $2 }' "/proc/$provision_pid/status" 2>/dev/null)
    provision_who=$(getent passwd "$provision_puid" 2>/dev/null); provision_who=${provision_who%%:*}
    provision_comm=$(head -c 32 "/proc/$provision_pid/comm" 2>/dev/null | tr -d '\t\n')
    provision_squat="${provision_squat}port $provision_port is held by pid $provision_pid (uid ${provision_puid:-?}${provision_who:+ $provision_who}: ${provision_comm:-?}), not by $1; "
  done <<PROVISION_EOF
$provision_out
PROVISION_EOF
  [ -z "$provision_squat" ] || return 2
  [ "${provision_out##*
}" = ok ]
}
provision_starting() {
  # the unit runs or is on its way up (not failed, not waiting to be restarted)
  provision_st=$(systemctl show -p ActiveState -p SubState -- "$1" 2>/dev/null | tr '\n' ' ')
  case " $provision_st" in
    *" SubState=auto-restart "*) return 1 ;;
    *" ActiveState=active "*|*" ActiveState=activating "*|*" ActiveState=reloading "*) return 0 ;;
  esac
  return 1
}
provision_settled() {
  provision_now=$(provision_ms)
  provision_end=$(( provision_now + @SETTLE_MS@ ))
  provision_max=$(( provision_now + @LISTEN_MS@ ))
  provision_early=' '
  if command -v ss >/dev/null 2>&1; then
    while :; do
      provision_ss=$(ss -Hltnp 2>/dev/null) || provision_ss=''
      provision_wait=''
      for provision_x in "$@"; do
        case $provision_x in *=*) ;; *) continue;; esac
        provision_u=${provision_x%%=*}
        case $provision_early in *" $provision_u "*) continue;; esac
        provision_rc=0
        provision_owned "$provision_u" "${provision_x#*=}" || provision_rc=$?
        if [ "$provision_rc" = 2 ]; then
          provision_unit_why "$provision_u" "${provision_squat%; }"
          return 1
        fi
        if [ "$provision_rc" = 0 ] && systemctl -q is-active -- "$provision_u"; then
          provision_early="$provision_early$provision_u "
          printf '@settled\t%s\tearly\n' "$provision_u" >&3
        elif ! provision_starting "$provision_u"; then
          # gone before it listened: its server could not bind, or died
          provision_unit_why "$provision_u"
          return 1
        else
          provision_wait=1
        fi
      done
      [ -n "$provision_wait" ] || break
      [ "$(provision_ms)" -lt "$provision_max" ] || break
      sleep @POLL@
    done
  fi
  provision_late=''
  for provision_x in "$@"; do
    case $provision_early in *" ${provision_x%%=*} "*) ;; *) provision_late=1;; esac
  done
  [ -n "$provision_late" ] || return 0
  provision_left=$(( provision_end - $(provision_ms) ))
  if [ "$provision_left" -gt 0 ]; then sleep "$(( provision_left / 1000 )).$(printf %03d $(( provision_left % 1000 )))"; fi
  for provision_x in "$@"; do
    provision_u=${provision_x%%=*}
    case $provision_early in *" $provision_u "*) continue;; esac
    if ! systemctl -q is-active -- "$provision_u"; then provision_unit_why "$provision_u"; return 1; fi
    printf '@settled\t%s\tlate\n' "$provision_u" >&3
  done
}"""


def settle_lib() -> str:
    return (SETTLE.replace("@SETTLE_MS@", str(int(UNIT_SETTLE_SECONDS * 1000)))
            .replace("@LISTEN_MS@", str(int(UNIT_LISTEN_SECONDS * 1000)))
            .replace("@POLL@", f"{SETTLE_POLL_SECONDS:g}"))


@functools.cache
def _lib(*path: str) -> str:
    return (files("provision._templates").joinpath(*path)).read_text("utf-8")


def settle_args(actions: list[Action]) -> list[str]:
    """`provision_settled`'s arguments: each unit started once, `UNIT=PORT,...` when its
    service's ports are known (systemd unit names never hold `=`)."""
    ports: dict[str, dict[int, None]] = {}
    for a in actions:
        if (unit := a.settles()) is not None:
            ports.setdefault(unit[0], {}).update(dict.fromkeys(unit[1]))
    return [u + ("=" + ",".join(map(str, p)) if p else "") for u, p in ports.items()]


def libs(actions: list[Action]) -> list[Lib]:
    """The shell libraries the actions' fragments call, each once, in their order."""
    by_name = {lib.name: lib for a in actions for lib in a.libs}
    return sorted(by_name.values(), key=lambda lib: lib.order)


def build(actions: list[Action]) -> str:
    """The whole batch. Exit status 0 and a final `@done` when every action ran."""
    body = []
    last_unit = max((i for i, a in enumerate(actions) if a.settles() is not None), default=-1)
    for i, a in enumerate(actions):
        body.append(f"printf '@step\\t{i}\\n' >&3")
        body.append(a.script())
        if i == last_unit:  # checked once, after the last start: one pause per batch
            body.append("provision_settled " + " ".join(quote(u) for u in settle_args(actions)))
    return "\n".join([
        "provision_apply() {",
        "set -eu",
        "umask 022",
        _lib("territory.sh"),
        _lib("steps", "files.sh"),
        SAFE_PATH,
        UNITS,
        settle_lib(),
        *(lib.text() for lib in libs(actions)),
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


@frozen
class UnitFailure:
    """Why a unit did not start: what systemd says and the last lines of its journal."""

    unit: str
    result: str
    exec_main_status: str
    state: str
    journal: tuple[str, ...]
    why: str = ""  # what the batch saw (its port held by another process)

    def summary(self, lines: int = 3) -> str:
        tail = [j for j in self.journal if j.strip() and not j.startswith("-- ")][-lines:]
        head = (f"{self.unit} did not start" + (f": {self.why}" if self.why else "")
                + f" (result {self.result or '?'}, exit status "
                f"{self.exec_main_status or '?'}, now {self.state or '?'})")
        return head + (": journal: " + " / ".join(tail) if tail else "")

    def to_json(self) -> dict[str, object]:
        return {"unit": self.unit, "result": self.result,
                "exec_main_status": self.exec_main_status, "state": self.state,
                "why": self.why, "journal": list(self.journal)}


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
    head += [""] * (5 - len(head))
    return UnitFailure(head[0], head[1], head[2], head[3], tuple(block), head[4])


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
