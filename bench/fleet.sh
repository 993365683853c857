#!/usr/bin/env bash
# Fleet-size benchmark (not a test): how a no-op `plan` and an `exec -- true` grow with the
# fleet, 1 to 128 of the lab's GPU hosts through one bastion, provision beside pyinfra
# (`pyinfra --dry deploy.py`, its plan of the same work: without -y, which skips the change
# detection, and `pyinfra exec -- true`). Every
# host is converged first (`provision apply`, the stand-in service of bench/converge.sh), so
# both plans find nothing to do. Each tool works on all N hosts at once (--forks N,
# --parallel N). Reported: wall time, and CPU-seconds per host, the tool's own (children
# included) and the whole machine's (the rest is the lab hosts' sshd and sudo on the same
# cores). Plot: docs/figures/fleet-size.png.
# Usage: bench/fleet.sh   (root; PROVISION_LAB_NAME picks the lab, default bench-fleet;
#        SIZES="1 8 32 64 128"; TOOLS="provision pyinfra"; RUNS=N (default 3) for provision
#        and for the peers up to 8 hosts, RUNS_LARGE (default 1) for the peers above)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PROVISION_LAB_NAME=${PROVISION_LAB_NAME:-bench-fleet}
SIZES=${SIZES:-"1 8 32 64 128"}
RUNS=${RUNS:-3}
RUNS_LARGE=${RUNS_LARGE:-1}
TOOLS=${TOOLS:-"provision pyinfra"}
OUT=$ROOT/bench/results/fleet
FIG=${FIG:-$ROOT/docs/figures/fleet-size.png}
MAX=0; for n in $SIZES; do [ "$n" -gt "$MAX" ] && MAX=$n; done

source bench/lib.sh
ensure_peers pyinfra=pyinfra matplotlib=matplotlib
ensure_lab "$MAX"
cleanup() { if [ "$STARTED_LAB" = 1 ]; then "$PROV" lab down >/dev/null || true; fi; }
trap cleanup EXIT
lab_inventory '{"notebook": {"port": 8888, "command": "/usr/bin/python3 -m http.server --bind {bind} {port}"}}'
"$PY" bench/converge_peers.py "$INV" "$OUT/peers"

all=(); for i in $(seq "$MAX"); do all+=("gpu$i"); done
echo "converging $MAX hosts first ..." >&2
TAG=converge t_run "$PROV" apply -i "$INV" --yes --forks "$MAX" \
  --playbook "$OUT/peers/playbook.yml" "${all[@]}" >/dev/null
if [ -s "$OUT/failures.txt" ]; then echo "the first converge failed: $OUT/failed-converge.log" >&2; exit 1; fi
: > "$OUT/cpu.txt"
quiet_down 300

RES=$OUT/results.txt
: > "$RES"
echo "lab $PROVISION_LAB_NAME, sizes $SIZES; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for n in $SIZES; do
  names=("${all[@]:0:$n}")
  csv=$(IFS=,; echo "${names[*]}")
  limit=(); for h in "${names[@]}"; do limit+=(--limit "$h"); done
  for tool in $TOOLS; do
    for scenario in plan exec; do
      case $tool.$scenario in
        # --detailed-exitcode: pending changes (3) count as a failed no-op
        provision.plan) cmd=("$PROV" plan -i "$INV" --forks "$n" --detailed-exitcode \
                             --playbook "$OUT/peers/playbook.yml" "${names[@]}") ;;
        provision.exec) cmd=("$PROV" exec -i "$INV" --forks "$n" "$csv" -- true) ;;
        pyinfra.plan) cmd=(sh -c "cd '$OUT/peers' && '$PEERS/bin/pyinfra' --dry --parallel $n ${limit[*]} inventory.py deploy.py </dev/null") ;;
        pyinfra.exec) cmd=(sh -c "cd '$OUT/peers' && '$PEERS/bin/pyinfra' -y --parallel $n ${limit[*]} inventory.py exec -- true") ;;
      esac
      runs=$RUNS; [ "$n" -gt 8 ] && [ "$tool" != provision ] && runs=$RUNS_LARGE
      TAG="warm-up" t_run "${cmd[@]}" >/dev/null
      times=()
      for _ in $(seq "$runs"); do times+=("$(TAG="$tool-$scenario-$n" t_run "${cmd[@]}")"); done
      m=$(median "${times[@]}")
      echo "$tool $scenario $n $m" >> "$RES"
      printf '%-9s %-4s %3s hosts: median %7.2fs  (runs: %s)\n' "$tool" "$scenario" "$n" "$m" "${times[*]}" >&2
    done
  done
done
"$PY" bench/fleet_report.py "$RES" "$OUT/cpu.txt" "$OUT/failures.txt" "$OUT/fleet.json" \
  | tee "$OUT/summary.txt"
mkdir -p "$(dirname "$FIG")"
"$PEERS/bin/python" bench/plot_fleet.py "$OUT/fleet.json" "$FIG"
echo "plot: $FIG" >&2
