# uid, OS, Docker, tools the steps rely on (the GPUs: gpus.sh)
fact_system() {
  printf 'id\t%s\n' "$(id -u)"
  if [ -r /etc/os-release ]; then
    (. /etc/os-release; printf 'os\t%s\t%s\t%s\t%s\n' "${ID:-}" "${VERSION_ID:-}" "${PRETTY_NAME:-}" "${ID_LIKE:-}")
  else
    printf 'os\t\t\t\t\n'
  fi
  if command -v docker >/dev/null 2>&1; then printf 'docker\tyes\n'; else printf 'docker\tno\n'; fi
  if command -v visudo >/dev/null 2>&1; then printf 'has\tvisudo\n'; fi
  # what provision needs of a host (provision.facts.support): systemd as init, apt
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then c=yes; else c=no; fi
  printf 'cap\tsystemd\t%s\n' "$c"
  if command -v apt-get >/dev/null 2>&1 && command -v dpkg >/dev/null 2>&1; then c=yes; else c=no; fi
  printf 'cap\tapt\t%s\n' "$c"
  return 0
}
