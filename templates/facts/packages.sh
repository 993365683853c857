# P:package -> dpkg status and version
fact_packages() {
  pkgs=''
  for a in "$@"; do case $a in P:*) pkgs="$pkgs ${a#P:}" ;; esac; done
  [ -n "$pkgs" ] || return 0
  # shellcheck disable=SC2086
  dpkg-query -W -f='pkg\t${Package}\t${Status}\t${Version}\n' -- $pkgs 2>/dev/null
  return 0
}
