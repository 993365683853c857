# S:unit (or a pattern of loaded units) -> `systemctl show` blocks, one property per record, a blank record between units
fact_units() {
  units=''
  for a in "$@"; do case $a in S:*) units="$units ${a#S:}" ;; esac; done
  [ -n "$units" ] || return 0
  # no globbing here: a pattern (provision-jupyter@*.service) is systemctl's to match
  set -f
  # shellcheck disable=SC2086
  { systemctl show --timestamp=unix -p Id,LoadState,UnitFileState,ActiveState,SubState,NeedDaemonReload,ActiveEnterTimestamp,Listen -- $units 2>/dev/null \
    || systemctl show -p Id,LoadState,UnitFileState,ActiveState,SubState,NeedDaemonReload -- $units; } |
    while IFS= read -r l; do printf 'unit\t%s\n' "$l"; done
  set +f
  printf 'unit\t\n'
}
