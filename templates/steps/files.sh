# Files and directories the batch writes (provision.steps.script), each where
# templates/territory.sh says: by root under a path only root can change (the name the walk
# resolved), else as the account whose directory it is, which must be the file's owner.

# provision_dir_of PATH: its directory (/ for a name at the top)
provision_dir_of() {
  pd_d=${1%/*}
  printf '%s\n' "${pd_d:-/}"
}

# provision_not_link PATH: a name in a directory only root changes is not a symlink (chmod
# would follow it): said and refused when it is.
provision_not_link() {
  if [ -L "$1" ]; then
    echo "refusing $1: it is a symlink (to $(readlink -- "$1")), not what provision manages there" >&2
    return 1
  fi
}

# provision_write PATH OWNER GROUP MODE [visudo]: the base64 on stdin becomes PATH: written
# to a temp file beside it, given its owner and mode (and checked by visudo when asked),
# then renamed over it, so a killed run leaves at most a temp file the next probe finds.
provision_write() {
  fw_d=$(provision_dir_of "$1")
  fw_w=$(provision_whose "$fw_d" "$2") || return 1
  case $fw_w in
    root\ *)
      fw_d=${fw_w#root }
      mkdir -p -- "$fw_d"
      fw_t=$(mktemp "$fw_d/.provision-tmp.XXXXXXXXXX")
      base64 -d > "$fw_t"
      chown -- "$2:$3" "$fw_t"
      chmod "$4" "$fw_t"
      if [ "${5:-}" = visudo ] && ! visudo -qcf "$fw_t"; then
        rm -f -- "$fw_t"; echo "visudo rejected $1"; return 1
      fi
      mv -fT -- "$fw_t" "${fw_d%/}/${1##*/}" ;;
    *)
      fw_u=${fw_w#as }; fw_u=${fw_u%% *}
      # shellcheck disable=SC2016
      provision_as "$fw_u" "$(id -g -- "$2")" sh -c 'set -eu
        umask 077
        mkdir -p -- "$1"
        t=$(mktemp "$1/.provision-tmp.XXXXXXXXXX")
        trap '\''rm -f -- "$t"'\'' EXIT
        base64 -d > "$t"
        chgrp -- "$3" "$t"
        chmod "$4" "$t"
        mv -fT -- "$t" "$2"
        trap - EXIT' sh "$fw_d" "$1" "$3" "$4" ;;
  esac
}

# provision_mkdir PATH OWNER GROUP MODE: the directory (and any missing above it), then
# its owner and mode.
provision_mkdir() { provision_own mkdir "$@"; }

# provision_attrs PATH OWNER GROUP MODE: owner, group and mode of an existing file. In an
# account's own directory only its group and mode change (the file is already theirs: the
# plan rewrites a file whose owner is wrong instead).
provision_attrs() { provision_own - "$@"; }

# provision_own mkdir|- PATH OWNER GROUP MODE: what both do.
provision_own() {
  fo_mk=$1; shift
  fo_w=$(provision_whose "$(provision_dir_of "$1")" "$2") || return 1
  case $fo_w in
    root\ *)
      fo_p="${fo_w#root }"; fo_p="${fo_p%/}/${1##*/}"
      if [ "$fo_mk" = mkdir ]; then mkdir -p -- "$fo_p"; fi
      provision_not_link "$fo_p" || return 1
      chown -h -- "$2:$3" "$fo_p"
      chmod "$4" "$fo_p" ;;
    *)
      fo_u=${fo_w#as }; fo_u=${fo_u%% *}
      # shellcheck disable=SC2016
      provision_as "$fo_u" "$(id -g -- "$2")" sh -c 'umask 077
        if [ "$4" = mkdir ]; then mkdir -p -- "$1" || exit 1; fi
        if [ -L "$1" ]; then
          echo "refusing $1: it is a symlink (to $(readlink -- "$1")), not what provision manages there" >&2
          exit 1
        fi
        chgrp -h -- "$2" "$1" && chmod "$3" "$1"' sh "$1" "$3" "$4" "$fo_mk" ;;
  esac
}

# provision_remove PATH...: each file removed, as whoever's directory it is in.
provision_remove() {
  for fr_p in "$@"; do
    fr_w=$(provision_whose "$(provision_dir_of "$fr_p")") || return 1
    case $fr_w in
      root\ *) fr_d="${fr_w#root }"; rm -f -- "${fr_d%/}/${fr_p##*/}" ;;
      *) fr_u=${fr_w#as }; provision_as "${fr_u%% *}" "${fr_u#* }" rm -f -- "$fr_p" ;;
    esac
  done
}
