# U:user (account, ~/.ssh, authorized_keys), R:group (its members); also every account whose authorized_keys
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
    # one `id` for the primary group and the group list (each process costs the probe
    # ~1 ms of CPU on every host of a run): uid=N(name) gid=N(name) groups=N(name),N,...
    u_id=$(id -- "$1")
    u_pg=${u_id#* gid=}; u_pg=${u_pg%% *}
    case $u_pg in *\(*) u_pg=${u_pg#*\(}; u_pg=${u_pg%\)} ;; esac
    u_gl=; u_rest=
    case $u_id in *" groups="*) u_rest=${u_id#* groups=} ;; esac
    while [ -n "$u_rest" ]; do
      u_x=${u_rest%%,*}
      case $u_rest in *,*) u_rest=${u_rest#*,} ;; *) u_rest= ;; esac
      case $u_x in *\(*) u_x=${u_x#*\(}; u_x=${u_x%\)} ;; esac
      u_gl="$u_gl${u_gl:+,}$u_x"
    done
    u_g=${gecos%%,*}
    case $u_g in *"$T"*) u_g=$(printf '%s' "$u_g" | tr -d '\t') ;; esac
    printf 'user\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$uid" "$u_pg" "$home" "$shell" \
      "${exp:--}" "$u_gl" "$u_g"
    fact_at "D:$home" "D:$home/.ssh" "f:$home/.ssh/authorized_keys" "M:$1:$home/.ssh/authorized_keys"
  }
  seen=' '
  for a in "$@"; do
    case $a in
      U:*) user_fact "${a#U:}"; seen="$seen ${a#U:} " ;;
      R:*) if g=$(getent group "${a#R:}"); then
             # its gid, and the account whose own group it is (if any): a team directory's
             # group must be neither a system group nor somebody's private group
             gid=${g#*:}; gid=${gid#*:}; gid=${gid%%:*}
             own=$(getent passwd | awk -F: -v g="$gid" '$4 == g { print $1; exit }')
             printf 'group\t%s\t%s\t%s\t%s\n' "${a#R:}" "${g##*:}" "$gid" "${own:--}"
           else
             printf 'nogroup\t%s\n' "${a#R:}"
           fi ;;
    esac
  done
  # every other account whose keys carry our marker (someone who left the team), read as
  # that account; a stat by name first (no open) spares a process for accounts without keys
  getent passwd | while IFS=: read -r n _ uid _ _ home _; do
    [ "$uid" -ge 1000 ] 2>/dev/null && [ "$uid" -ne 65534 ] || continue
    case $seen in *" $n "*) continue ;; esac
    [ -f "$home/.ssh/authorized_keys" ] || continue
    if [ -n "$(fact_at "M:$n:$home/.ssh/authorized_keys")" ]; then user_fact "$n"; fi
  done
}
