# apt's state for the packages step: are there package lists, when were they last
# refreshed, and which wanted packages (P:) that dpkg does not report installed have a
# candidate. apt-cache runs only for packages still missing: a converged host pays a stat.
fact_apt() {
  n=0
  for f in /var/lib/apt/lists/*_Packages*; do [ -e "$f" ] && n=$((n + 1)); done
  printf 'aptlists\t%s\n' "$n"
  for f in /var/lib/provision/apt-updated /var/lib/apt/periodic/update-success-stamp; do
    [ -f "$f" ] && printf 'aptstamp\t%s\n' "$(stat -c %Y -- "$f")"
  done
  printf 'aptnow\t%s\n' "$(date +%s)"
  if command -v gpg >/dev/null 2>&1; then printf 'aptgpg\tyes\n'; else printf 'aptgpg\tno\n'; fi
  pkgs=''
  for a in "$@"; do case $a in P:*) pkgs="$pkgs ${a#P:}" ;; esac; done
  [ -n "$pkgs" ] || return 0
  # shellcheck disable=SC2086
  installed=$(dpkg-query -W -f='${Package}\t${Status}\n' -- $pkgs 2>/dev/null |
    awk -F'\t' '$2 ~ / installed$/ && $2 !~ /^deinstall/ {print $1}')
  missing=''
  for p in $pkgs; do
    case " $(echo $installed) " in *" $p "*) ;; *) missing="$missing $p" ;; esac
  done
  [ -n "$missing" ] || return 0
  # shellcheck disable=SC2086
  apt-cache policy -- $missing 2>/dev/null | awk -v T="$T" '
    /^[^ ].*:$/ { name = substr($0, 1, length($0) - 1) }
    /^  Candidate: / && name != "" { print "cand" T name T $2 }'
  return 0
}
