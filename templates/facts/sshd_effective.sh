# sshd's effective settings (sshd -T: the config as sshd itself reads it), then its status
fact_sshd_effective() {
  sshd=$(command -v sshd 2>/dev/null || echo /usr/sbin/sshd)
  if [ -x "$sshd" ]; then
    out=$("$sshd" -T 2>&1); rc=$?
    printf '%s\n' "$out" | sed "s/^/sshdt$T/"
  else
    rc=127
  fi
  printf 'sshdrc\t%s\n' "$rc"
}
