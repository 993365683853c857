# Shared by the fact fragments: one record per line, fields tab-separated.
file_fact() {
  if [ -f "$1" ] && [ ! -L "$1" ]; then
    # shellcheck disable=SC2046
    set -- "$1" $(stat -c '%a %U %G %Y %s' -- "$1")
    # small files travel whole and their digest is taken from those bytes on our side
    if [ "$6" -le 65536 ]; then
      sum='='; c=$(base64 -w0 < "$1"); [ -n "$c" ] || c=.
    else
      sum=$(sha256sum < "$1"); sum=${sum%% *}; c=-
    fi
    printf 'file\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$sum" "$2" "$3" "$4" "$5" "$c"
  elif [ -e "$1" ] || [ -L "$1" ]; then
    printf 'file\t%s\tnotfile\n' "$1"
  else
    printf 'file\t%s\tabsent\n' "$1"
  fi
}
dir_fact() {
  if [ -d "$1" ] && [ ! -L "$1" ]; then
    printf 'dir\t%s\t%s\n' "$1" "$(stat -c "%a$T%U$T%G" -- "$1")"
  elif [ -e "$1" ] || [ -L "$1" ]; then
    printf 'dir\t%s\tnotdir\n' "$1"
  else
    printf 'dir\t%s\tabsent\n' "$1"
  fi
}
tmp_scan() {
  for f in "$1"/.provision-tmp.*; do
    if [ -e "$f" ] || [ -L "$f" ]; then printf 'tmp\t%s\n' "$f"; fi
  done
}
# Every TCP and UDP socket with its process (`ss -Htuanp`, Netid first), read once per probe:
# the listeners, tcpstates and jupyter_auth facts all read $PROBE_SS after calling ss_load.
ss_load() {
  [ -n "${PROBE_SS_DONE:-}" ] && return 0
  PROBE_SS=$(ss -Htuanp 2>/dev/null); PROBE_SS_DONE=1
}
