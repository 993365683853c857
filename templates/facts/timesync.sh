# the clock: timedatectl's view (NTP wanted, synchronised, a daemon it can drive), which
# time daemons run, and whether this is a container (whose clock is the machine's)
fact_timesync() {
  tv=$(systemd-detect-virt --container 2>/dev/null) || tv=none
  printf 'tvirt\t%s\n' "${tv:-none}"
  if command -v timedatectl >/dev/null 2>&1; then
    timeout 5 timedatectl show -p NTP -p NTPSynchronized -p CanNTP 2>/dev/null | sed "s/^/tsync$T/"
  fi
  for td in chrony ntp ntpsec openntpd systemd-timesyncd; do
    printf 'tdaemon\t%s\t%s\n' "$td" "$(systemctl is-active "$td.service" 2>/dev/null | head -n 1)"
  done
  return 0
}
