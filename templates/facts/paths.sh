# The readers of paths (file, dir and tmp records), and `fact_here` over `KIND:PATH`
# arguments: F a file and the temp files beside it, D a directory and the temp files in it,
# f a file alone, M:NAME:PATH a `managed<TAB>NAME` record when the file's first line is our
# marker. Run by root on paths only root can change, and as the account whose directory a
# path is in otherwise (`fact_at` in lib.sh): this text is also handed to that account's sh.
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
fact_here() {
  for fh_a in "$@"; do
    fh_v=${fh_a#??}
    case $fh_a in
      F:*) file_fact "$fh_v"; tmp_scan "${fh_v%/*}" ;;
      D:*) dir_fact "$fh_v"; tmp_scan "$fh_v" ;;
      f:*) file_fact "$fh_v" ;;
      M:*)
        fh_n=${fh_v%%:*}; fh_p=${fh_v#*:}; fh_first=
        if [ -f "$fh_p" ] && [ ! -L "$fh_p" ]; then IFS= read -r fh_first < "$fh_p" || :; fi
        if [ "$fh_first" = '# Managed by provision' ]; then printf 'managed\t%s\n' "$fh_n"; fi ;;
    esac
  done
}
