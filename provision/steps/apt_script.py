"""apt actions -> POSIX sh for the batch (pure): wait for the dpkg lock, refresh the lists,
install packages, install our apt sources with their keys checked and put back on failure.

The functions below are called as `if ! provision_apt_... ; then exit 1; fi`, so `set -e`
is off inside them and every failure is handled where it happens: a failing step prints one
`@error<TAB>message` line on stderr (what the recap says) and returns 1. A successful wait
for the lock prints `@note<TAB>...` on fd 3 (the recap's note); a wait, as it starts,
`@wait<TAB>dpkg-lock<TAB>HOLDER` (the live progress, `provision.hosts.progress`).

The dpkg lock: unattended-upgrades and cloud-init hold `/var/lib/dpkg/lock-frontend` (and
`lock`, `lists/lock`) for minutes after a cloud image's first boot. They are fcntl (POSIX)
locks, so `flock` cannot see them; `/proc/locks` lists every holder with its pid and the
locked inode, which needs no tool beyond awk (fuser is not on every image). We poll it until
the locks are free, saying who held them and for how long, up to the timeout; apt's own
`DPkg::Lock::Timeout` (apt >= 1.9.11) covers the moment between our check and its lock.
"""

from __future__ import annotations

import base64
from shlex import quote

from provision.text import printable

from .action import Lib

STAGE = "/var/lib/provision/apt-stage"
LOG = "/var/lib/provision/apt.log"
STAMP = "/var/lib/provision/apt-updated"
LOCKS = ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock", "/var/lib/apt/lists/lock")
EOF_MARK = "PROVISION_APT_EOF"
APT_OPTS = ("-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold")

LIB = rf"""provision_apt_holder() {{
  for f in {' '.join(LOCKS)}; do
    [ -e "$f" ] || continue
    id=$(stat -c '%d %i' -- "$f" 2>/dev/null) || continue
    # /proc/locks: "N: POSIX ADVISORY WRITE PID MAJ:MIN:INODE ..." (hex MAJ:MIN; waiters
    # have "->" after N:); match device and inode, as st_dev encodes them (new_encode_dev)
    pid=$(awk -v dev="${{id% *}}" -v ino="${{id#* }}" '
      function hex(s,  i, n) {{ n = 0; s = tolower(s)
        for (i = 1; i <= length(s); i++) n = n * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
        return n }}
      $2 != "->" && split($6, a, ":") == 3 && a[3] == ino {{
        maj = hex(a[1]); min = hex(a[2])
        if (min % 256 + maj * 256 + int(min / 256) * 1048576 == dev) {{ print $5; exit }} }}' /proc/locks 2>/dev/null)
    if [ -n "$pid" ]; then
      # a process names itself: keep only plain characters of that name
      printf '%s (pid %s, %s)' "$(tr -cd 'A-Za-z0-9._:+-' < /proc/"$pid"/comm 2>/dev/null || echo '?')" "$pid" "$f"
      return 0
    fi
  done
  return 0
}}
provision_apt_wait() {{
  start=$(date +%s%N); first=''; PROVISION_APT_LEFT=$1
  while :; do
    h=$(provision_apt_holder)
    [ -n "$h" ] || break
    if [ -z "$first" ]; then
      first=$h
      echo "waiting up to $1 s for the dpkg lock, held by $h" >&2
      printf '@wait\tdpkg-lock\t%s\n' "$h" >&3  # progress, as it starts
    fi
    if [ $(( ($(date +%s%N) - start) / 1000000000 )) -ge "$1" ]; then
      printf '@error\tthe dpkg lock is still held by %s after %s s (another package manager is running: unattended-upgrades or cloud-init on a fresh image); nothing was changed by this step, run again when it is done\n' "$h" "$1" >&2
      return 1
    fi
    sleep 0.2
  done
  if [ -n "$first" ]; then
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    PROVISION_APT_LEFT=$(( $1 - ms / 1000 )); [ "$PROVISION_APT_LEFT" -ge 1 ] || PROVISION_APT_LEFT=1
    printf '@note\twaited %d.%d s for the dpkg lock (held by %s)\n' $((ms / 1000)) $((ms % 1000 / 100)) "$first" >&3
  fi
  return 0
}}
provision_apt_error() {{
  # $1: what failed; the first E: (or W:/Err:) line of apt's log says why
  why=$(grep -m1 '^E: ' {LOG} || grep -m1 -E '^(W|Err):' {LOG} || tail -n1 {LOG})
  printf '@error\t%s: %s\n' "$1" "$why" >&2
}}
provision_apt_update() {{
  # $1 lock timeout; then the URIs whose fetch must not fail
  provision_apt_wait "$1" || return 1
  shift
  mkdir -p /var/lib/provision && chmod 0700 /var/lib/provision || return 1
  if ! DEBIAN_FRONTEND=noninteractive apt-get update -q -o DPkg::Lock::Timeout="$PROVISION_APT_LEFT" > {LOG} 2>&1; then
    cat {LOG} >&2; provision_apt_error 'apt-get update failed'; return 1
  fi
  cat {LOG} >&2
  for u in "$@"; do
    bad=$(grep -E '^(W|E): ' {LOG} | grep -m1 -F -- "$u")
    if [ -n "$bad" ]; then printf '@error\tapt-get update could not fetch %s: %s\n' "$u" "$bad" >&2; return 1; fi
  done
  touch {STAMP}
}}
provision_apt_install() {{
  # $1 lock timeout; then the packages
  provision_apt_wait "$1" || return 1
  shift
  mkdir -p /var/lib/provision && chmod 0700 /var/lib/provision || return 1
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout="$PROVISION_APT_LEFT" {APT_OPTS} -- "$@" > {LOG} 2>&1; then
    cat {LOG} >&2; provision_apt_error "apt-get install $*"; return 1
  fi
  cat {LOG} >&2
  # the effect, not apt's exit status: dpkg must now report each one installed (a virtual
  # package's name installs a provider and would be "missing" on every run)
  for p in "$@"; do
    st=$(dpkg-query -W -f='${{Status}}' -- "$p" 2>/dev/null)
    case $st in
      deinstall*) ;;
      *" installed") continue ;;
    esac
    printf '@error\tapt-get install %s succeeded but dpkg does not report %s installed (status: %s); is it a virtual package? name the package that provides it\n' "$p" "$p" "${{st:-unknown}}" >&2
    return 1
  done
}}
provision_apt_key_check() {{
  # $1 staged key file, $2 pinned fingerprint, $3 source name: exactly one primary key, ours
  command -v gpg >/dev/null 2>&1 || {{ printf '@error\tapt source %s: gpg is not installed, so the signing key cannot be checked against its pinned fingerprint; nothing installed\n' "$3" >&2; return 1; }}
  g=$(mktemp -d) || return 1
  out=$(GNUPGHOME=$g gpg --batch --no-tty --show-keys --with-colons -- "$1" 2>/dev/null)
  rm -rf "$g"
  pubs=$(printf '%s\n' "$out" | grep -c '^pub:')
  fpr=$(printf '%s\n' "$out" | awk -F: '$1 == "pub" {{ p = 1; next }} p && $1 == "fpr" {{ print $10; exit }}')
  if [ "$pubs" != 1 ]; then
    printf '@error\tapt source %s: the signing key holds %s primary keys, expected exactly one (fingerprint %s); refused, nothing installed\n' "$3" "$pubs" "$2" >&2
    return 1
  fi
  if [ "$fpr" != "$2" ]; then
    printf '@error\tapt source %s: the signing key has fingerprint %s, the inventory pins %s; refused, nothing installed\n' "$3" "${{fpr:-?}}" "$2" >&2
    return 1
  fi
}}
provision_apt_put() {{
  # $1 staged file, $2 target: replaced atomically, 0644 root:root
  provision_safe_path "$2" || return 1
  mkdir -p "${{2%/*}}" || return 1
  t=$(mktemp "${{2%/*}}/.provision-tmp.XXXXXXXXXX") || return 1
  if cat -- "$1" > "$t" && chown root:root "$t" && chmod 0644 "$t" && mv -fT "$t" "$2"; then return 0; fi
  rm -f "$t"; return 1
}}
provision_apt_backup() {{
  # $1 index, $2 target: keep a copy (or remember it was absent) to put back on failure
  if [ -e "$2" ]; then cp -p -- "$2" {STAGE}/old."$1" || return 1; else : > {STAGE}/absent."$1" || return 1; fi
}}
provision_apt_restore() {{
  # $1 index, $2 target
  if [ -e {STAGE}/absent."$1" ]; then rm -f -- "$2"; else provision_apt_put {STAGE}/old."$1" "$2"; fi
}}"""


APT = Lib(10, "apt", lambda: LIB)  # the apt actions' library, first of the batch's libraries

def _b64(content: str) -> str:
    return base64.encodebytes(content.encode("utf-8", errors="surrogateescape")).decode()


def sources(writes: list[tuple[str, str]], keys: list[tuple[str, str, str]],
            removes: list[str], uris: tuple[str, ...], lock_timeout: int) -> str:
    """`AptSources`' shell: stage every new file (path, content), check every key (path,
    fingerprint, source), back up, install, update; put back on failure."""
    targets = [path for path, _ in writes] + removes
    lines = [f"rm -rf {STAGE}", f"mkdir -p -m 0700 {STAGE}"]
    for i, (_, content) in enumerate(writes):
        lines += [f"base64 -d > {STAGE}/new.{i} <<'{EOF_MARK}'", _b64(content) + EOF_MARK]
    index = {path: i for i, (path, _) in enumerate(writes)}
    for path, fingerprint, source in keys:
        lines.append(f"if ! provision_apt_key_check {STAGE}/new.{index[path]} "
                     f"{quote(fingerprint)} {quote(source)}; then rm -rf {STAGE}; exit 1; fi")
    # wait for the lock before touching a file: a held lock then changes nothing at all
    lines.append(f"if ! provision_apt_wait {lock_timeout}; then rm -rf {STAGE}; exit 1; fi")
    for i, path in enumerate(targets):
        lines.append(f"if ! provision_apt_backup {i} {quote(path)}; then rm -rf {STAGE}; exit 1; fi")
    restore = "; ".join(f"provision_apt_restore {i} {quote(p)}" for i, p in enumerate(targets))
    apply = [f"provision_apt_put {STAGE}/new.{i} {quote(path)}" for i, (path, _) in enumerate(writes)]
    apply += [f"rm -f -- {quote(path)}" for path in removes]
    uris_text = " ".join(quote(u) for u in uris)
    apply.append(f"provision_apt_update {lock_timeout} {uris_text}".rstrip())
    lines += [
        "if ! { " + " && ".join(apply) + "; }; then",
        f"  {restore}",
        "  echo 'apt sources: put back as they were' >&2",
        f"  rm -rf {STAGE}; exit 1",
        "fi",
        f"rm -rf {STAGE}",
    ]
    return "\n".join(lines)


def error_line(stderr: str) -> str | None:
    """The last `@error` message a failed step printed (None: it printed none). It quotes
    what the host said (apt's E: line, gpg's fingerprint), so it is escaped here."""
    found = None
    for line in stderr.splitlines():
        if line.startswith("@error\t"):
            found = printable(line.split("\t", 1)[1])
    return found


def notes(stdout: str) -> list[str]:
    """The `@note` lines of a batch (e.g. how long it waited for the dpkg lock), escaped."""
    return [printable(line.split("\t", 1)[1]) for line in stdout.splitlines()
            if line.startswith("@note\t")]
