#!/usr/bin/env bash
# Measure `provision lab up` (bastion + 2 GPU hosts + ns1 + resolver), `lab down`, and the
# memory of each container (PSS of the processes in its network namespace). Root needed.
# Usage: bench/lab.sh [ROUNDS]   (lab name: $PROVISION_LAB_NAME, default bench-<pid>)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
export PROVISION_LAB_NAME=${PROVISION_LAB_NAME:-bench-$$}
PROVISION=${PROVISION:-.venv/bin/provision}
DIR=/var/lib/provision-lab/$PROVISION_LAB_NAME
[ "$(id -u)" = 0 ] || { echo "bench/lab.sh: root needed" >&2; exit 2; }
trap '$PROVISION lab down >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT

now() { date +%s.%N; }
ups=(); downs=()
for i in $(seq 1 "$ROUNDS"); do
  t0=$(now); $PROVISION lab up --gpus 2 >/dev/null; t1=$(now)
  ups+=("$(echo "$t1 - $t0" | bc)")
  if [ "$i" = 1 ]; then
    sleep 5   # let the containers settle before measuring memory
    $PROVISION lab status --json | .venv/bin/python -c '
import json, sys
d = json.load(sys.stdin)
rows = [h for h in d["hosts"] if h.get("memory_kib") is not None]
for h in rows:
    print("memory {:<9} {:6.1f} MiB (PSS)".format(h["host"], h["memory_kib"] / 1024))
total = sum(h["memory_kib"] for h in rows) / 1024
print("memory total     {:6.1f} MiB for {} containers".format(total, len(rows)))'
    $PROVISION lab exec -- ssh -F "$DIR/ssh_config" gpu1 true   # it really works
  fi
  t0=$(now); $PROVISION lab down >/dev/null; t1=$(now)
  downs+=("$(echo "$t1 - $t0" | bc)")
done
printf 'lab up   (5 containers, wall, incl. CLI start): %s s\n' "${ups[*]}"
printf 'lab down (wall, incl. CLI start):               %s s\n' "${downs[*]}"
