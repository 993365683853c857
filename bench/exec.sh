#!/usr/bin/env bash
# `provision exec` benchmark (not a test): one one-line command (`uptime`) on 1 and on N of
# the lab's GPU hosts through the same bastion, as the login user, side by side with
# `pyinfra INVENTORY exec -- uptime` and `ansible gpu -m command -a uptime` on the same hosts
# (their projects come from bench/converge_peers.py, as in bench/converge.sh).
# Goal (reported, not asserted): provision at 32 hosts <= 1.5x its 1-host time.
# Usage: bench/exec.sh   (root; PROVISION_LAB_NAME picks the lab, default bench-exec;
#        SIZES="1 32"; TOOLS="provision pyinfra ansible"; RUNS=N (default 5), median reported)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PROVISION_LAB_NAME=${PROVISION_LAB_NAME:-bench-exec}
SIZES=${SIZES:-"1 32"}
RUNS=${RUNS:-5}
TOOLS=${TOOLS:-"provision pyinfra ansible"}
OUT=$ROOT/bench/results/exec
MAX=0; for n in $SIZES; do [ "$n" -gt "$MAX" ] && MAX=$n; done

source bench/lib.sh
if [[ " $TOOLS " == *" pyinfra "* || " $TOOLS " == *" ansible "* ]]; then
  ensure_peers pyinfra=pyinfra ansible=ansible-core
fi
ensure_lab "$MAX"
cleanup() { if [ "$STARTED_LAB" = 1 ]; then "$PROV" lab down >/dev/null || true; fi; }
trap cleanup EXIT
lab_inventory '{}'
if [[ " $TOOLS " == *" pyinfra "* || " $TOOLS " == *" ansible "* ]]; then
  "$PY" bench/converge_peers.py "$INV" "$OUT/peers"
  sed -i "s/^forks = .*/forks = $MAX/" "$OUT/peers/ansible.cfg"
fi
export ANSIBLE_CONFIG=$OUT/peers/ansible.cfg ANSIBLE_NOCOLOR=1

RES=$OUT/results.txt
: > "$RES"
for n in $SIZES; do
  names=(); for i in $(seq "$n"); do names+=("gpu$i"); done
  csv=$(IFS=,; echo "${names[*]}")
  limit=(); for h in "${names[@]}"; do limit+=(--limit "$h"); done
  for tool in $TOOLS; do
    case $tool in
      provision) cmd=("$PROV" exec -i "$INV" --forks "$MAX" "$csv" -- uptime) ;;
      pyinfra) cmd=(sh -c "cd '$OUT/peers' && '$PEERS/bin/pyinfra' -y ${limit[*]} inventory.py exec -- uptime") ;;
      ansible) cmd=(sh -c "cd '$OUT/peers' && '$PEERS/bin/ansible' -i hosts.ini gpu --limit '$csv' -m command -a uptime") ;;
    esac
    times=()
    for _ in $(seq "$RUNS"); do times+=("$(TAG="$tool-$n" t_run "${cmd[@]}")"); done
    m=$(median "${times[@]}")
    echo "$tool $n $m" >> "$RES"
    printf '%-9s %3s hosts: median %6.2fs  (runs: %s)\n' "$tool" "$n" "$m" "${times[*]}"
  done
done
"$PY" - "$RES" <<'PYEOF'
import sys
t = {}
for line in open(sys.argv[1]):
    tool, n, s = line.split()
    t[(tool, int(n))] = float(s)
sizes = sorted({n for _, n in t})
lo, hi = sizes[0], sizes[-1]
if ("provision", lo) in t and ("provision", hi) in t and hi != lo:
    r = t[("provision", hi)] / t[("provision", lo)]
    print(f"provision exec: {hi} hosts / {lo} host = {r:.2f}x (goal <= 1.5x)")
for n in sizes:
    for peer in ("pyinfra", "ansible"):
        if (peer, n) in t and ("provision", n) in t:
            print(f"{n} hosts: {peer}/provision {t[(peer, n)] / t[('provision', n)]:.1f}x")
PYEOF
