# Shared by the fleet benchmarks (converge.sh, exec.sh, fleet.sh); sourced, not run.
# Expects ROOT (the repository) and OUT (a results folder); sets PY, PROV, PEERS.
PY=$ROOT/.venv/bin/python
PROV=$ROOT/.venv/bin/provision
PEERS=$ROOT/bench/.peers/venv
mkdir -p "$OUT"

ensure_peers() {  # the peers' own venv: ensure_peers MODULE=PACKAGE ... (import name = pip name)
  local spec missing=()
  for spec in "$@"; do
    "$PEERS/bin/python" -c "import ${spec%%=*}" 2>/dev/null || missing+=("${spec#*=}")
  done
  [ "${#missing[@]}" = 0 ] && return
  [ -x "$PEERS/bin/python" ] || python3 -m venv "$PEERS"
  "$PEERS/bin/pip" install -q "${missing[@]}"
}

STARTED_LAB=0
ensure_lab() {  # a lab of at least $1 GPU hosts: reuses one that is up, else brings one up
  local gpus
  gpus=$("$PROV" lab status --json 2>/dev/null | "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(sum(h["host"].startswith("gpu") for h in d["hosts"]) if d.get("up") else 0)' 2>/dev/null || echo 0)
  if [ "$gpus" -lt "$1" ]; then
    [ "$gpus" -gt 0 ] && "$PROV" lab down >/dev/null
    "$PROV" lab up --gpus "$1" >/dev/null
    STARTED_LAB=1
  fi
  read -r NS LABINV < <("$PY" - <<'PYEOF'
import os
from provision.lab import plan as P
from provision.lab.state import read_state
p = P.plan_from_state(read_state(os.environ["PROVISION_LAB_NAME"]))
print(p.operator.netns, p.paths["inventory"])
PYEOF
)
  cp "$(dirname "$LABINV")/ssh_config" "$OUT/ssh_config"
}

lab_inventory() {  # the lab's inventory, no roles or DNS, every GPU host with $1 as its services
  "$PY" - "$LABINV" "$OUT/inventory.yml" "$1" <<'PYEOF'
import json, sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
for h in doc["hosts"].values():
    h["roles"] = []
    h["services"] = json.loads(sys.argv[3])
doc.pop("roles", None); doc.pop("dns", None)
open(sys.argv[2], "w").write(yaml.safe_dump(doc, sort_keys=False))
PYEOF
  INV=$OUT/inventory.yml
}

: > "$OUT/failures.txt"
: > "$OUT/cpu.txt"
TIMER=()  # GNU time (Debian package `time`), when there: the tool's CPU
[ -x /usr/bin/time ] && TIMER=(/usr/bin/time -f "%U %S" -o "$OUT/last.cpu")
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }  # whole machine, in jiffies
t_run() {  # seconds for one command (in the operator namespace); a failed run is timed too,
  local s e b0 b1 tag=${TAG:-run}  # and its log kept (a tool that loses hosts at 32 is a result)
  # CPU-seconds too: the tool's own (its children included: ansible's ssh) and the whole
  # machine's, of which the rest is the lab's hosts (sshd, sudo, systemd) on the same cores
  b0=$(busy)
  s=$(date +%s.%N)
  echo "0 0" > "$OUT/last.cpu"
  if ! "${TIMER[@]}" ip netns exec "$NS" "$@" >"$OUT/last.log" 2>&1; then
    cp "$OUT/last.log" "$OUT/failed-$tag.log"
    echo "$tag: exit status non-zero; log: $OUT/failed-$tag.log" >> "$OUT/failures.txt"
    echo "  FAILED ($tag), log kept: $OUT/failed-$tag.log" >&2
  fi
  e=$(date +%s.%N)
  b1=$(busy)
  read -r cu cs < <(tail -1 "$OUT/last.cpu")
  echo "$tag $(python3 -c "print(round($cu + $cs, 2), round(($b1 - $b0) / $(getconf CLK_TCK), 2))")" >> "$OUT/cpu.txt"
  "$PY" -c "print(round($e - $s, 3))"
}
median() { "$PY" -c 'import statistics,sys; print(round(statistics.median(map(float, sys.argv[1:])), 3))' "$@"; }
quiet_down() {  # wait (up to $1 s, default 300) until the machine is >= 90% idle over 5 s:
  local i a b  # a lab of 128 hosts is still booting for a minute after its logins work
  for i in $(seq $(( ${1:-300} / 5 ))); do
    a=$(awk '/^cpu /{print $5, $2+$3+$4+$5+$6+$7+$8}' /proc/stat); sleep 5
    b=$(awk '/^cpu /{print $5, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
    python3 -c "import sys; a, b = [list(map(int, s.split())) for s in sys.argv[1:]]; sys.exit((b[0]-a[0]) / max(b[1]-a[1], 1) < 0.9)" "$a" "$b" && return 0
  done
  echo "  the machine did not quiet down within ${1:-300} s (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
}
