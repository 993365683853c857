# K:DIR: the services' secret files (provision.facts.credentials). Every DIR is under
# /etc/provision/credentials (0700 root: nobody else can name anything there). A file's
# content never leaves the host: only sha256(salt || content), salt the host's own.
fact_credentials() {
  fc_root=/etc/provision/credentials
  fc_salt=''
  if [ -f "$fc_root/.salt" ] && [ ! -L "$fc_root/.salt" ] && [ "$(stat -c %u "$fc_root")" = 0 ]; then
    fc_salt=$(cat -- "$fc_root/.salt")
  fi
  printf 'credsalt\t%s\n' "${fc_salt:-absent}"
  # the root directory itself (its mode and owner decide whether it is made again)
  if [ -d "$fc_root" ] && [ ! -L "$fc_root" ]; then
    printf 'creddir\t%s\t%s\n' "$fc_root" "$(stat -c '%a %U' "$fc_root" | tr ' ' "$T")"
  fi
  for a in "$@"; do
    case $a in K:"$fc_root"/*) ;; *) continue ;; esac
    d=${a#K:}
    { [ -d "$d" ] && [ ! -L "$d" ]; } || continue
    printf 'creddir\t%s\t%s\n' "$d" "$(stat -c '%a %U' "$d" | tr ' ' "$T")"
    [ -n "$fc_salt" ] || continue
    for f in "$d"/*; do
      { [ -f "$f" ] && [ ! -L "$f" ]; } || continue
      fp=$({ printf '%s' "$fc_salt"; cat -- "$f"; } | sha256sum)
      printf 'credfile\t%s\t%s\t%s\n' "$f" "$(stat -c '%a %U' "$f" | tr ' ' "$T")" "${fp%% *}"
    done
  done
}
