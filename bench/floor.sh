#!/usr/bin/env bash
# The OpenSSH floor of a no-op (benchmark, not a test): one `ssh` through the bastion that
# does the probe's work (the very script and arguments `provision plan` sends for the
# default playbook, run with `sudo -n sh -s`), side by side with `provision plan` and a
# no-op `provision apply` of the same converged host, and `provision exec gpu1 -- true`
# beside `ssh gpu1 true`, interleaved round by round in one run.
# Goals (reported, not asserted; issue 23): no-op plan/apply of one host <= 1.4x the floor.
# Usage: bench/floor.sh  (root; PROVISION_LAB_NAME picks the lab, default bench-floor;
#        RUNS=N rounds, default 7; median reported)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PROVISION_LAB_NAME=${PROVISION_LAB_NAME:-bench-floor}
RUNS=${RUNS:-7}
PY=$ROOT/.venv/bin/python
PROV=$ROOT/.venv/bin/provision
OUT=$ROOT/bench/results/floor
mkdir -p "$OUT"
unset PYTHONDONTWRITEBYTECODE   # what users get: cached bytecode

STARTED_LAB=0
if ! "$PROV" lab status --json 2>/dev/null | "$PY" -c 'import json,sys; sys.exit(0 if json.load(sys.stdin).get("up") else 1)' 2>/dev/null; then
  "$PROV" lab up --gpus 1 >/dev/null
  STARTED_LAB=1
fi
cleanup() { if [ "$STARTED_LAB" = 1 ]; then "$PROV" lab down >/dev/null || true; fi; }
trap cleanup EXIT

read -r NS INV < <("$PY" - <<'PYEOF'
import os
from provision.lab import plan as P
from provision.lab.state import read_state
p = P.plan_from_state(read_state(os.environ["PROVISION_LAB_NAME"]))
print(p.operator.netns, p.paths["inventory"])
PYEOF
)
SSHCFG=$(dirname "$INV")/ssh_config
run() { ip netns exec "$NS" "$@"; }

# converge gpu1 once, so what follows is a no-op
run "$PROV" apply -i "$INV" --yes gpu1 >"$OUT/first-apply.log" 2>&1

# the probe plan sends for gpu1: its script and its arguments, as provision builds them
"$PY" - "$INV" "$OUT/probe.sh" "$OUT/probe.args" <<'PYEOF'
import shlex, sys
from provision.facts import probe_script
from provision.hosts.converge import BASE_REQUEST
from provision.inventory import load_inventory
from provision.playbook import DEFAULT_PLAYBOOK, load
inv = load_inventory(sys.argv[1])
host = inv.node("gpu1")
request = BASE_REQUEST
for s in load(DEFAULT_PLAYBOOK).build(inv, host):
    request = request.merge(s.request())
open(sys.argv[2], "w").write(probe_script(request))
open(sys.argv[3], "w").write(" ".join(shlex.quote(a) for a in request.args()))
PYEOF
ARGS=$(cat "$OUT/probe.args")

median() { "$PY" -c 'import statistics,sys; print(round(statistics.median(map(float, sys.argv[1:])), 3))' "$@"; }
# name -> command; every round runs each once, in this order, so load from the machine's
# other users falls on all of them alike (medians of RUNS rounds, one warm-up round first)
NAMES=(floor plan apply exec_floor exec check)
declare -A CMD=(
  [floor]="ssh -F '$SSHCFG' -o ClearAllForwardings=yes gpu1 \"sudo -n sh -s -- $ARGS\" < '$OUT/probe.sh'"
  [plan]="'$PROV' plan -i '$INV' --detailed-exitcode gpu1"
  [apply]="'$PROV' apply -i '$INV' --yes gpu1"
  [exec_floor]="ssh -F '$SSHCFG' -o ClearAllForwardings=yes gpu1 true"
  [exec]="'$PROV' exec -i '$INV' gpu1 -- true"
  [check]="'$PROV' check -i '$INV'"
)
declare -A T R
for name in "${NAMES[@]}"; do
  run sh -c "${CMD[$name]}" >"$OUT/$name.log" 2>&1 </dev/null || { echo "$name failed: see $OUT/$name.log" >&2; exit 1; }
done
for _ in $(seq "$RUNS"); do
  for name in "${NAMES[@]}"; do
    s=$(date +%s%N)
    run sh -c "${CMD[$name]}" >"$OUT/$name.log" 2>&1 </dev/null || { echo "$name failed: see $OUT/$name.log" >&2; exit 1; }
    e=$(date +%s%N)
    T[$name]="${T[$name]:-} $("$PY" -c "print(($e - $s) / 1e9)")"
  done
done
for name in "${NAMES[@]}"; do
  # shellcheck disable=SC2086  # the list of times, one word each
  R[$name]=$(median ${T[$name]})
  echo "  $name:${T[$name]} -> median ${R[$name]} s" >&2
done

echo "one converged lab host through the bastion, median of $RUNS; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-34s %8s %7s\n' "command" "median" "ratio"
printf '%-34s %7.3fs %7s\n' "ssh -J bastion gpu1 'sudo sh -s' (floor)" "${R[floor]}" "1.00x"
for k in plan apply; do
  printf '%-34s %7.3fs %6.2fx\n' "provision $k gpu1 (no-op)" "${R[$k]}" "$("$PY" -c "print(${R[$k]} / ${R[floor]})")"
done
printf '%-34s %7.3fs %7s\n' "ssh -J bastion gpu1 true" "${R[exec_floor]}" "1.00x"
printf '%-34s %7.3fs %6.2fx\n' "provision exec gpu1 -- true" "${R[exec]}" "$("$PY" -c "print(${R[exec]} / ${R[exec_floor]})")"
printf '%-34s %7.3fs\n' "provision check (start-up)" "${R[check]}"
printf 'goal: no-op <= 1.40x the floor -> plan %s, apply %s\n' \
  "$("$PY" -c "print('met' if ${R[plan]} <= 1.4 * ${R[floor]} else 'NOT met')")" \
  "$("$PY" -c "print('met' if ${R[apply]} <= 1.4 * ${R[floor]} else 'NOT met')")"
