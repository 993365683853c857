# Whose directory a path is in, and acting there as its owner (docs/trust-model.md#the-people-on-the-host).
#
# Root never opens, writes, chowns, chmods or removes by name inside a directory another
# account owns or can write: that account could swap a name on the path for a symlink
# between a check and the act. Where the whole path is root's, nobody else can swap
# anything on it and root acts by name; where it enters another account's directory, what
# is done there is done as that account (it can do nothing to us it could not do itself).
#
# provision_whose DIR [OWNER]: prints `root PATH` when every directory from / down to DIR,
# and every symlink on the way, is root's and writable by nobody else (PATH: DIR with those
# symlinks resolved, the name root then uses); or `as UID GID` (the
# account's, and the group of its directory) when the walk meets another account's
# directory or symlink first: from there on the path is that account's. With OWNER, that
# account must be OWNER: a file for root, or for a third account, is never put in
# somebody's directory. A missing directory ends the walk (what is made below it is made
# by whoever acts). Fails, naming the directory, on a shared one (writable by a group or by
# everyone, sticky or not) and on a name on the path that is not a directory.
provision_whose() {
  pw_path=$1; pw_own=${2:-}; pw_hops=0
  while :; do
    set -f; pw_ifs=$IFS; IFS=/
    pw_c=''; set -- /
    for pw_p in ${pw_path#/}; do
      case $pw_p in
        ''|.) continue ;;
        ..) IFS=$pw_ifs; set +f; echo "refusing $pw_path: '..' in the path" >&2; return 1 ;;
      esac
      pw_c="$pw_c/$pw_p"; set -- "$@" "$pw_c"
    done
    IFS=$pw_ifs; set +f
    pw_path=${pw_c:-/}
    # one stat for every prefix: those that exist come first, in order (each is the
    # previous one's child), so line N is prefix N
    pw_st=$(stat -c '%u %g %f' -- "$@" 2>/dev/null) || :
    pw_i=0; pw_next=''
    while read -r pw_u pw_g pw_f; do
      [ -n "$pw_f" ] || break
      pw_i=$((pw_i + 1))
      eval "pw_n=\${$pw_i}"
      pw_t=$(( 0x$pw_f & 0xF000 ))
      if [ "$pw_t" -eq 40960 ] && [ "$pw_u" = 0 ]; then
        # root's symlink in root's directory: follow it, and walk where it leads
        pw_hops=$((pw_hops + 1))
        [ "$pw_hops" -le 40 ] || { echo "refusing $pw_path: too many symlinks" >&2; return 1; }
        # where it leads, every link and '..' in its target resolved: that path is walked
        # (and acted on) instead, so a name nobody checked is never used
        pw_l=$(readlink -m -- "$pw_n") || return 1
        pw_next="$pw_l${pw_path#"$pw_n"}"
        break
      fi
      if [ "$pw_t" -ne 16384 ] && [ "$pw_t" -ne 40960 ]; then
        echo "refusing $pw_path: $pw_n is not a directory" >&2; return 1
      fi
      if [ "$pw_u" = 0 ]; then
        if [ $(( 0x$pw_f & 18 )) -ne 0 ]; then  # 022: group or others may write
          echo "refusing $pw_path: $pw_n is writable by others than root (mode $(printf %o $(( 0x$pw_f & 4095 )))): anybody who can write there could swap a name under root" >&2
          return 1
        fi
        continue
      fi
      # another account's directory (or symlink): the rest of the path is theirs
      if [ -n "$pw_own" ]; then
        pw_ou=$(id -u -- "$pw_own" 2>/dev/null) || pw_ou=-
        if [ "$pw_ou" != "$pw_u" ] || [ "$pw_ou" = 0 ]; then
          pw_who=$(getent passwd "$pw_u" 2>/dev/null) || pw_who=''
          echo "refusing $pw_path for $pw_own: $pw_n belongs to uid $pw_u${pw_who:+ (${pw_who%%:*})}, who could swap a name under root" >&2
          return 1
        fi
      fi
      echo "as $pw_u $pw_g"
      return 0
    done <<PW_EOF
$pw_st
PW_EOF
    [ -n "$pw_next" ] || break
    pw_path=$pw_next
  done
  echo "root $pw_path"
}

# provision_as [-t SECONDS] UID GID CMD...: CMD as that account, with its groups when it has
# a passwd entry, no new privileges, and no descriptor of ours but 0-2 (it can neither forge
# the batch's progress on fd 3 nor keep the host lock on 8 and 9); with -t, killed after
# SECONDS (by root: the account could stop a timeout of its own).
provision_as() {
  pa_t=''
  if [ "$1" = -t ]; then pa_t=$2; shift 2; fi
  pa_u=$1; pa_g=$2; shift 2
  if getent passwd "$pa_u" >/dev/null 2>&1; then pa_grp=--init-groups; else pa_grp=--clear-groups; fi
  if [ -n "$pa_t" ]; then
    timeout -s KILL "$pa_t" setpriv --reuid="$pa_u" --regid="$pa_g" "$pa_grp" --no-new-privs -- "$@" 3>&- 8>&- 9>&-
  else
    setpriv --reuid="$pa_u" --regid="$pa_g" "$pa_grp" --no-new-privs -- "$@" 3>&- 8>&- 9>&-
  fi
}
