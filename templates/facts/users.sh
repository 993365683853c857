# U:user (account, ~/.ssh, authorized_keys); also every account whose authorized_keys
# starts with our marker line (people removed from the team).
fact_users() {
  user_fact() {
    line=$(getent passwd "$1") || { printf 'nouser\t%s\n' "$1"; return 0; }
    IFS=: read -r _ _ uid _ gecos home shell <<PROBE_EOF
$line
PROBE_EOF
    exp=-
    if sline=$(getent shadow "$1" 2>/dev/null); then
      IFS=: read -r _ _ _ _ _ _ _ exp _ <<PROBE_EOF
$sline
PROBE_EOF
    fi
    printf 'user\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$uid" "$(id -gn "$1")" "$home" "$shell" \
      "${exp:--}" "$(id -Gn "$1" | tr ' ' ,)" "$(printf '%s' "${gecos%%,*}" | tr -d '\t')"
    dir_fact "$home/.ssh"
    file_fact "$home/.ssh/authorized_keys"
    tmp_scan "$home/.ssh"
  }
  seen=' '
  for a in "$@"; do
    case $a in U:*) user_fact "${a#U:}"; seen="$seen ${a#U:} " ;; esac
  done
  getent passwd | while IFS=: read -r n _ uid _ _ home _; do
    [ "$uid" -ge 1000 ] 2>/dev/null && [ "$uid" -ne 65534 ] || continue
    first=
    [ -f "$home/.ssh/authorized_keys" ] && IFS= read -r first < "$home/.ssh/authorized_keys"
    if [ "$first" = '# Managed by provision' ]; then
      printf 'managed\t%s\n' "$n"
      case $seen in *" $n "*) ;; *) user_fact "$n" ;; esac
    fi
  done
}
