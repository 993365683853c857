# Shared by the fact fragments: one record per line, fields tab-separated.
# fact_at KIND:PATH...: `fact_here` (paths.sh) for each, where templates/territory.sh says:
# by root on a path only root can change, else as the account whose directory the path is
# in (root never opens a name in somebody's directory: they could swap it for a link to
# /etc/shadow or a FIFO), one process per account. A path in a shared directory is read by
# nobody and reported as not a file (or not a directory): the write that follows is refused,
# naming that directory.
fact_at() {
  fa_as=''  # lines `UID GID<TAB>KIND:PATH` for the paths read as an account
  fa_pd=''; fa_pw=''  # the last directory walked, and whose it is
  for fa_a in "$@"; do
    fa_p=${fa_a#??}
    case $fa_a in D:*) fa_d=$fa_p ;; M:*) fa_d=${fa_p#*:}; fa_d=${fa_d%/*} ;; *) fa_d=${fa_p%/*} ;; esac
    fa_d=${fa_d:-/}
    # below another account's directory everything is theirs: one walk per home, not per path
    case $fa_pw in
      as\ *) case $fa_d in "$fa_pd"|"$fa_pd"/*) fa_w=$fa_pw ;; *) fa_w='' ;; esac ;;
      *) fa_w='' ;;
    esac
    if [ -z "$fa_w" ] && ! fa_w=$(provision_whose "$fa_d" 2>/dev/null); then
      case $fa_a in
        D:*) printf 'dir\t%s\tnotdir\n' "$fa_p" ;;
        [Ff]:*) printf 'file\t%s\tnotfile\n' "$fa_p" ;;
      esac
      continue
    fi
    case $fa_w in as\ *) [ "$fa_w" = "$fa_pw" ] || fa_pd=$fa_d; fa_pw=$fa_w ;; esac
    case $fa_w in
      root\ *) fact_here "$fa_a" ;;
      as\ *) fa_as="$fa_as${fa_w#as }$T$fa_a
" ;;
    esac
  done
  while [ -n "$fa_as" ]; do
    fa_k=${fa_as%%"$T"*}; fa_rest=''
    set --
    while IFS= read -r fa_l; do
      [ -n "$fa_l" ] || continue
      if [ "${fa_l%%"$T"*}" = "$fa_k" ]; then set -- "$@" "${fa_l#*"$T"}"
      else fa_rest="$fa_rest$fa_l
"
      fi
    done <<FA_EOF
$fa_as
FA_EOF
    fact_as "${fa_k% *}" "${fa_k#* }" "$@"
    fa_as=$fa_rest
  done
}
# fact_as UID GID KIND:PATH...: fact_here as that account, for at most 10 s (a FIFO swapped
# in blocks a read), and only the records asked for come back: a process of that account
# could be made to print anything.
fact_as() {
  fs_u=$1; fs_g=$2; shift 2
  fs_allow=$(printf '%s\n' "$@")
  # shellcheck disable=SC2016
  provision_as -t 10 "$fs_u" "$fs_g" sh -c 'T=$(printf "\t"); eval "$1"; shift; fact_here "$@"' \
    sh "$FACT_PATHS" "$@" </dev/null 2>/dev/null | A=$fs_allow awk '
    BEGIN {
      FS = "\t"; n = split(ENVIRON["A"], a, "\n")
      for (i = 1; i <= n; i++) {
        k = substr(a[i], 1, 1); v = substr(a[i], 3)
        if (k == "F" || k == "f") want["file" SUBSEP v] = 1
        if (k == "D") { want["dir" SUBSEP v] = 1; tmpdir[v] = 1 }
        if (k == "F") { d = v; sub(/\/[^\/]*$/, "", d); tmpdir[d] = 1 }
        if (k == "M") { m = v; sub(/:.*/, "", m); want["managed" SUBSEP m] = 1 }
      }
    }
    ($1 == "file" || $1 == "dir" || $1 == "managed") && (($1 SUBSEP $2) in want) && !seen[$1 SUBSEP $2]++ { print; next }
    $1 == "tmp" && NF == 2 {
      d = $2; sub(/\/[^\/]*$/, "", d)
      if ((d in tmpdir) && index(substr($2, length(d) + 2), ".provision-tmp.") == 1 && tmps++ < 1000) print
    }'
}
# Every TCP and UDP socket with its process (`ss -Htuanp`, Netid first), read once per probe:
# the listeners, tcpstates and jupyter_auth facts all read $PROBE_SS after calling ss_load.
ss_load() {
  [ -n "${PROBE_SS_DONE:-}" ] && return 0
  PROBE_SS=$(ss -Htuanp 2>/dev/null); PROBE_SS_DONE=1
}
