#!/usr/bin/env bash
# `provision check` start-up: median wall time of >= 5 runs (goal <= 0.25 s, issue 23), side by side
# with a bare interpreter and `ansible-inventory --list` when the peers venv has it.
set -euo pipefail
cd "$(dirname "$0")/.."
unset PYTHONDONTWRITEBYTECODE   # measure what users get: cached bytecode
INV=${INV:-inventories/example.yml}
RUNS=${RUNS:-10}
.venv/bin/provision check -i "$INV" >/dev/null   # warm the bytecode cache
cmds=(".venv/bin/python -c pass" ".venv/bin/provision check -i $INV")
if [[ -x bench/.peers/bin/ansible-inventory ]]; then
  cmds+=("bench/.peers/bin/ansible-inventory -i bench/peers/ansible/inventory.yml --list")
fi
if command -v hyperfine >/dev/null; then
  hyperfine -N --warmup 2 --runs "$RUNS" --export-json /tmp/provision-startup.json "${cmds[@]}" >/dev/null
  .venv/bin/python - <<'PY'
import json, statistics
r = json.load(open("/tmp/provision-startup.json"))["results"]
base = None
print(f"{'command':60} {'median':>9} {'ratio':>7}")
for x in r:
    med = statistics.median(x["times"])
    if "provision check" in x["command"]:
        base = med
for x in r:
    med = statistics.median(x["times"])
    ratio = f"{med / base:.2f}x" if base else ""
    print(f"{x['command'][:60]:60} {med * 1000:7.0f}ms {ratio:>7}")
print(f"goal: provision check <= 250 ms -> {'met' if base and base <= 0.25 else 'NOT met'}")
PY
else
  for c in "${cmds[@]}"; do
    ts=()
    for _ in $(seq "$RUNS"); do
      s=$(date +%s%N); $c >/dev/null; e=$(date +%s%N); ts+=($(( (e - s) / 1000000 )))
    done
    printf '%-60s median %s ms\n' "$c" "$(printf '%s\n' "${ts[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')"
  done
fi
