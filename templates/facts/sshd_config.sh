# sshd's configuration files as sshd reads them: sshd_config, then every file an Include
# names (relative to /etc/ssh, globs expanded in C order), each file once, at most 64.
# One record per file: path and base64 content. The order of reading is decided on our side
# (provision.facts.sshd_config), from these files alone.
fact_sshd_config() {
  queue=/etc/ssh/sshd_config; seen=' '; n=0
  # whether any file has a Match block: without one, sshd -T -C per user equals sshd -T and
  # fact_sshd_effective skips those runs (one sshd -T each, ~20 ms)
  PROBE_SSHD_MATCH=no
  while [ -n "$queue" ] && [ "$n" -lt 64 ]; do
    queue=${queue# }; f=${queue%% *}; queue=${queue#"$f"}
    case $seen in *" $f "*) continue ;; esac
    seen="$seen$f "; n=$((n + 1))
    [ -f "$f" ] || continue
    c=$(base64 -w0 < "$f"); [ -n "$c" ] || c=.
    printf 'sshdcf\t%s\t%s\n' "$f" "$c"
    if grep -qi '^[[:space:]]*match[[:space:]=]' "$f"; then PROBE_SSHD_MATCH=yes; fi
    for g in $(sed -n 's/^[[:space:]]*[Ii][Nn][Cc][Ll][Uu][Dd][Ee][[:space:]=][[:space:]]*//p' "$f"); do
      case $g in /*) ;; *) g=/etc/ssh/$g ;; esac
      # shellcheck disable=SC2086
      for m in $g; do if [ -f "$m" ]; then queue="$queue $m"; fi; done
    done
  done
  return 0
}
