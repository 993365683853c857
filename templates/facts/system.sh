# uid, OS, Docker, GPUs, tools the steps rely on
fact_system() {
  printf 'id\t%s\n' "$(id -u)"
  if [ -r /etc/os-release ]; then
    (. /etc/os-release; printf 'os\t%s\t%s\t%s\n' "${ID:-}" "${VERSION_ID:-}" "${PRETTY_NAME:-}")
  fi
  if command -v docker >/dev/null 2>&1; then printf 'docker\tyes\n'; else printf 'docker\tno\n'; fi
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
      while IFS= read -r l; do printf 'gpu\t%s\n' "$l"; done
  fi
  if command -v visudo >/dev/null 2>&1; then printf 'has\tvisudo\n'; fi
  return 0
}
