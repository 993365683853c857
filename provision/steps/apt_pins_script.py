"""Pinned installs and holds -> POSIX sh for the batch (pure). Used beside
`provision.steps.apt_script`, whose lock wait, log and error line these reuse.

`InstallPinned`: before anything is installed, each package's candidate (what apt makes of
our pin file, written earlier in the batch) must match its pinned version: a pin that
matches no version in the sources, or that another preferences file outranks, fails naming
the candidate, and nothing is installed. Then `apt-get install --allow-downgrades` (a pin of
priority 1001 may mean an older version) and `--allow-change-held-packages` (a held package
moves to its pinned version), and dpkg must report each one installed at a matching version.

`AptHolds`: `apt-mark hold`/`unhold`, then dpkg's selection read back for each.
"""

from __future__ import annotations

from .action import Lib
from .apt_script import APT_OPTS, LOG

LIB = rf"""provision_apt_candidate() {{
  apt-cache policy -- "$1" 2>/dev/null | awk '/^  Candidate: / {{ print $2; exit }}'
}}
provision_apt_install_pinned() {{
  # $1 lock timeout; then NAME GLOB pairs (names are package names, globs Debian versions)
  provision_apt_wait "$1" || return 1
  shift
  ap_names=''; ap_pairs=''
  while [ $# -ge 2 ]; do ap_names="$ap_names $1"; ap_pairs="$ap_pairs$1 $2
"; shift 2; done
  while read -r ap_n ap_g; do
    [ -n "$ap_n" ] || continue
    ap_c=$(provision_apt_candidate "$ap_n")
    case $ap_c in
      "(none)"|'') ;;
      $ap_g) continue ;;
    esac
    printf '@error\t%s: apt'"'"'s candidate is %s, not a version matching the pin %s: no such version in the sources, or another file in /etc/apt/preferences.d outranks ours (apt-cache policy %s); nothing installed\n' "$ap_n" "${{ap_c:-none}}" "$ap_g" "$ap_n" >&2
    return 1
  done <<PROVISION_PINS_EOF
$ap_pairs
PROVISION_PINS_EOF
  mkdir -p /var/lib/provision && chmod 0700 /var/lib/provision || return 1
  # shellcheck disable=SC2086
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades --allow-change-held-packages -o DPkg::Lock::Timeout="$PROVISION_APT_LEFT" {APT_OPTS} -- $ap_names > {LOG} 2>&1; then
    cat {LOG} >&2; provision_apt_error "apt-get install$ap_names"; return 1
  fi
  cat {LOG} >&2
  while read -r ap_n ap_g; do
    [ -n "$ap_n" ] || continue
    ap_v=$(dpkg-query -W -f='${{Status}} ${{Version}}' -- "$ap_n" 2>/dev/null) || ap_v=''
    case $ap_v in deinstall*) ap_v='' ;; *" installed "*) ap_v=${{ap_v##* }} ;; *) ap_v='' ;; esac
    case $ap_v in ?*) case $ap_v in $ap_g) continue ;; esac ;; esac
    printf '@error\t%s: installed at %s after apt-get install, not a version matching the pin %s\n' "$ap_n" "${{ap_v:-nothing}}" "$ap_g" >&2
    return 1
  done <<PROVISION_PINS_EOF
$ap_pairs
PROVISION_PINS_EOF
}}
provision_apt_holds() {{
  # $1 hold|unhold; then names: marked, and dpkg's selection read back for each
  ah_m=$1; shift
  apt-mark "$ah_m" -- "$@" >&2 || {{ printf '@error\tapt-mark %s %s failed\n' "$ah_m" "$*" >&2; return 1; }}
  for ah_n in "$@"; do
    ah_s=$(dpkg-query -W -f='${{Status}}' -- "$ah_n" 2>/dev/null) || ah_s=''
    case $ah_m:$ah_s in hold:hold\ *|unhold:install\ *|unhold:deinstall\ *) continue ;; esac
    printf '@error\tapt-mark %s %s: dpkg reports %s\n' "$ah_m" "$ah_n" "${{ah_s:-nothing}}" >&2
    return 1
  done
}}"""


PINS = Lib(20, "apt-pins", lambda: LIB)
