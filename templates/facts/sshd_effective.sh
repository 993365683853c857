# sshd's effective settings (sshd -T: the config as sshd itself reads it), then its status;
# then, per C:user argument, the same for a connection of that user from where this probe's
# own SSH session comes (sshd -T -C, so that Match blocks count; skipped when no file has
# a Match block, see fact_sshd_config). sudo drops
# SSH_CONNECTION: it is read from the first ancestor process that has it.
fact_sshd_effective() {
  sshd=$(command -v sshd 2>/dev/null || echo /usr/sbin/sshd)
  if [ -x "$sshd" ]; then
    out=$("$sshd" -T 2>&1); rc=$?
    printf '%s\n' "$out" | sed "s/^/sshdt$T/"
  else
    rc=127
  fi
  printf 'sshdrc\t%s\n' "$rc"
  [ "$rc" = 0 ] || return 0
  users=''
  for a in "$@"; do
    case $a in C:*,*|C:*=*|C:*' '*) ;; C:?*) users="$users ${a#C:}" ;; esac
  done
  [ -n "$users" ] || return 0
  if [ "${PROBE_SSHD_MATCH:-}" = no ]; then
    # no Match block in any file sshd reads (fact_sshd_config ran first): the same for all
    for u in $users; do printf 'sshdcsame\t%s\n' "$u"; done
    return 0
  fi
  conn=${SSH_CONNECTION:-}; p=$$; i=0
  while [ -z "$conn" ] && [ "$p" -gt 1 ] 2>/dev/null && [ $i -lt 12 ]; do
    conn=$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | sed -n 's/^SSH_CONNECTION=//p')
    p=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$p/status" 2>/dev/null); i=$((i + 1))
  done
  spec=''
  if [ -n "$conn" ]; then
    # shellcheck disable=SC2086
    set -- $conn
    printf 'sshdconn\t%s\t%s\t%s\n' "$1" "${3:-}" "${4:-}"
    spec=",host=$1,addr=$1${3:+,laddr=$3}${4:+,lport=$4}"
  fi
  for u in $users; do
    out=$("$sshd" -T -C "user=$u$spec" 2>&1); rc=$?
    printf '%s\n' "$out" | sed "s/^/sshdc$T$u$T/"
    printf 'sshdcrc\t%s\t%s\n' "$u" "$rc"
  done
}
