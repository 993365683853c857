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
PY=$ROOT/.venv/bin/python
PROV=$ROOT/.venv/bin/provision
PEERS=$ROOT/bench/.peers/venv
OUT=$ROOT/bench/results/exec
mkdir -p "$OUT"
MAX=0; for n in $SIZES; do [ "$n" -gt "$MAX" ] && MAX=$n; done

if [[ " $TOOLS " == *" pyinfra "* || " $TOOLS " == *" ansible "* ]] && \
   { [ ! -x "$PEERS/bin/pyinfra" ] || [ ! -x "$PEERS/bin/ansible" ]; }; then
  python3 -m venv "$PEERS"
  "$PEERS/bin/pip" install -q pyinfra ansible-core
fi
gpus=$("$PROV" lab status --json 2>/dev/null | "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(sum(h["host"].startswith("gpu") for h in d["hosts"]) if d.get("up") else 0)' 2>/dev/null || echo 0)
STARTED_LAB=0
if [ "$gpus" -lt "$MAX" ]; then
  [ "$gpus" -gt 0 ] && "$PROV" lab down >/dev/null
  "$PROV" lab up --gpus "$MAX" >/dev/null
  STARTED_LAB=1
fi
cleanup() { if [ "$STARTED_LAB" = 1 ]; then "$PROV" lab down >/dev/null || true; fi; }
trap cleanup EXIT

read -r NS LABINV < <("$PY" - <<'PYEOF'
import os
from provision.lab import plan as P
from provision.lab.state import read_state
p = P.plan_from_state(read_state(os.environ["PROVISION_LAB_NAME"]))
print(p.operator.netns, p.paths["inventory"])
PYEOF
)
INV=$OUT/inventory.yml
cp "$(dirname "$LABINV")/ssh_config" "$OUT/ssh_config"
"$PY" - "$LABINV" "$INV" <<'PYEOF'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
for h in doc["hosts"].values():
    h["roles"] = []
    h["services"] = {}
doc.pop("roles", None); doc.pop("dns", None)
open(sys.argv[2], "w").write(yaml.safe_dump(doc, sort_keys=False))
PYEOF
if [[ " $TOOLS " == *" pyinfra "* || " $TOOLS " == *" ansible "* ]]; then
  "$PY" bench/converge_peers.py "$INV" "$OUT/peers"
  sed -i "s/^forks = .*/forks = $MAX/" "$OUT/peers/ansible.cfg"
fi
export ANSIBLE_CONFIG=$OUT/peers/ansible.cfg ANSIBLE_NOCOLOR=1

t_run() {  # seconds for one command in the operator namespace; a failure is reported
  local s e tag=${TAG:-run}
  s=$(date +%s.%N)
  if ! ip netns exec "$NS" "$@" >"$OUT/last.log" 2>&1; then
    echo "  FAILED ($tag), log: $OUT/failed-$tag.log" >&2; cp "$OUT/last.log" "$OUT/failed-$tag.log"
  fi
  e=$(date +%s.%N)
  "$PY" -c "print(round($e - $s, 3))"
}
median() { "$PY" -c 'import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

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
