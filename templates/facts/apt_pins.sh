# Pins and holds (provision.facts.apt_pins): dpkg's selection of each package provision
# holds by its record (/var/lib/provision/apt-holds, root's, one name a line), and, for the
# wanted packages (P:) that have a pin file of ours, what apt makes of the pin: installed,
# candidate and each version with its priority (`apt-cache policy`). A host without pins
# pays two stats; `apt-mark showhold` (0.4 s) is not run: it reads the same selections
# dpkg-query prints in 10 ms.
fact_apt_pins() {
  rec=/var/lib/provision/apt-holds
  if [ -f "$rec" ] && [ ! -L "$rec" ]; then
    names=$(grep -E '^[a-z0-9][a-z0-9+.-]*$' "$rec")
    for n in $names; do
      st=$(dpkg-query -W -f='${Status}' -- "$n" 2>/dev/null) || st=''
      printf 'pinrec\t%s\t%s\n' "$n" "${st:--}"
    done
  fi
  pinned=''
  for a in "$@"; do
    case $a in P:*) ;; *) continue ;; esac
    p=${a#P:}
    f=/etc/apt/preferences.d/provision-$(printf '%s' "$p" | tr + _).pref
    [ -f "$f" ] && pinned="$pinned $p"
  done
  [ -n "$pinned" ] || return 0
  # shellcheck disable=SC2086
  apt-cache policy -- $pinned 2>/dev/null | awk -v T="$T" '
    /^[^ ].*:$/ { name = substr($0, 1, length($0) - 1); next }
    name == "" { next }
    /^  Installed: / { inst = $2; next }
    /^  Candidate: / { print "pinpol" T name T inst T $2; next }
    /^ (\*\*\*|   ) [^ ]+ -?[0-9]+$/ { v = $0; sub(/^ \*\*\* /, "", v); sub(/^     /, "", v)
      split(v, f, " "); print "pinver" T name T f[1] T f[2] }'
  return 0
}
