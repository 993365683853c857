#!/usr/bin/env bash
# `make bench`: every benchmark in this folder, one after the other.
set -uo pipefail
cd "$(dirname "$0")"
status=0
for b in startup.sh lab.sh converge.sh floor.sh exec.sh fleet.sh tunnel.sh sg.py dns.sh dns_zonecheck.py migrate.sh audit.py cluster.py; do
  [[ -x $b || -f $b ]] || continue
  printf '\n== %s\n' "$b"
  case $b in
    *.py) ../.venv/bin/python "$b" || status=1 ;;
    *) bash "$b" || status=1 ;;
  esac
done
exit $status
