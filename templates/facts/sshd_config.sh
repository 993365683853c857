# sshd's configuration files as sshd reads them: sshd_config, then every file an Include
# names (relative to /etc/ssh, globs expanded in C order), each file once, at most 64.
# `sshdcf PATH` per file, then `sshdln PATH N TEXT` per line; one awk per level of
# Includes (two on a stock host), which also finds the next level's patterns and whether
# any file has a Match block (PROBE_SSHD_MATCH, read by fact_sshd_effective: without one,
# sshd -T -C per user equals sshd -T and is skipped). The order of reading is decided on
# our side (provision.facts.sshd_config), from these lines alone.
fact_sshd_config() {
  PROBE_SSHD_MATCH=no
  level=/etc/ssh/sshd_config; seen='
'; n=0
  while [ -n "$level" ] && [ "$n" -lt 64 ]; do
    # the level's files as awk's arguments: a name may hold spaces (`0 cloud.conf` sorts
    # before ours), so they are never joined into one word list
    set --
    for f in $level; do
      case $seen in *"
$f
"*) continue ;; esac
      [ -f "$f" ] || continue
      seen="$seen$f
"; n=$((n + 1)); set -- "$@" "$f"
      printf 'sshdcf\t%s\n' "$f"
    done
    # no file at this level (an Include that matches nothing, e.g. an empty
    # sshd_config.d): nothing is left unread, unlike a stop at the cap below
    [ "$#" -gt 0 ] || { level=''; break; }
    { found=$(awk -v T="$T" '
      { print "sshdln" T FILENAME T FNR T $0 }
      tolower($1) == "include" { for (i = 2; i <= NF; i++) print "inc " $i > "/dev/fd/3" }
      tolower($1) ~ /^match(=|$)/ { print "match" > "/dev/fd/3" }' "$@" 3>&1 1>&4); } 4>&1
    level=''
    set -f  # patterns stay patterns here (relative ones are relative to /etc/ssh, not our cwd)
    for w in $found; do
      case $w in
        inc) ;;
        match) PROBE_SSHD_MATCH=yes ;;
        /*) level="$level $w" ;;
        *) level="$level /etc/ssh/$w" ;;
      esac
    done
    set +f
  done
  # stopped at the cap with Includes left: sshd reads files we did not send, and a Match
  # block may be in one, so sshd -T -C is asked per user after all
  [ -z "$level" ] || PROBE_SSHD_MATCH=yes
  return 0
}
