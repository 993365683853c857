#!/usr/bin/env bash
# Converge benchmark (not a test): provision vs pyinfra vs ansible-core doing the same work
# (team users, keys, sudoers, unit files, jupyter config, enable+start) on the lab's GPU hosts
# through the same bastion, as the same non-root login user with sudo.
#   no-op on 1 host, no-op on 2 hosts, cold run on 2 hosts (hosts reset in between)
# Goals: no-op 1 host <= 1.0 s and >= 4x faster than pyinfra and Ansible; 2 hosts <= 1.3x
# the 1-host time; cold >= 2x faster than pyinfra.
# Usage: bench/converge.sh   (root; PROVISION_LAB_NAME picks the lab, default bench-conv;
#        RUNS=N repetitions, median reported)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PROVISION_LAB_NAME=${PROVISION_LAB_NAME:-bench-conv}
RUNS=${RUNS:-5}
PY=$ROOT/.venv/bin/python
PROV=$ROOT/.venv/bin/provision
PEERS=$ROOT/bench/.peers/venv
OUT=$ROOT/bench/results/converge
mkdir -p "$OUT"

if [ ! -x "$PEERS/bin/pyinfra" ] || [ ! -x "$PEERS/bin/ansible-playbook" ]; then
  python3 -m venv "$PEERS"
  "$PEERS/bin/pip" install -q pyinfra ansible-core
fi
up=$("$PROV" lab status --json 2>/dev/null | "$PY" -c 'import json,sys; print(json.load(sys.stdin).get("up", False))' 2>/dev/null || echo False)
STARTED_LAB=0
if [ "$up" != "True" ]; then
  "$PROV" lab up >/dev/null
  STARTED_LAB=1
fi
cleanup() { if [ "$STARTED_LAB" = 1 ]; then "$PROV" lab down >/dev/null || true; fi; }
trap cleanup EXIT

read -r NS INV < <("$PY" - <<'PYEOF'
import os
from provision.lab import plan as P
from provision.lab.shell import read_state
p = P.plan_from_state(read_state(os.environ["PROVISION_LAB_NAME"]))
print(p.operator.netns, p.paths["inventory"])
PYEOF
)
leader() {
  "$PY" -c "import os,sys; from provision.lab.shell import read_state, container_leader; print(container_leader(read_state(os.environ['PROVISION_LAB_NAME'])['pids'][sys.argv[1]]))" "$1"
}
G1=$(leader gpu1); G2=$(leader gpu2)

"$PY" bench/converge_peers.py "$INV" "$OUT/peers"
cd "$OUT/peers"
export ANSIBLE_CONFIG=$OUT/peers/ansible.cfg ANSIBLE_NOCOLOR=1

reset_hosts() {  # undo everything the bootstrap does, on both hosts
  for pid in $G1 $G2; do
    nsenter -t "$pid" -a -- sh -c '
      for u in /etc/systemd/system/provision-*.service; do
        [ -e "$u" ] || continue
        case $u in *provision-firewall*) continue;; esac
        systemctl disable --now "$(basename "$u")" >/dev/null 2>&1 || true; rm -f "$u"
      done
      systemctl daemon-reload
      rm -rf /etc/provision/jupyter /srv/runs /etc/sudoers.d/provision-*
      for u in alice bob; do userdel -r "$u" >/dev/null 2>&1 || true; done'
  done
}

t_run() {  # seconds for one command (in the operator namespace); fails loudly
  local s e
  s=$(date +%s.%N)
  if ! ip netns exec "$NS" "$@" >"$OUT/last.log" 2>&1; then
    echo "FAILED: $*" >&2; tail -20 "$OUT/last.log" >&2; exit 1
  fi
  e=$(date +%s.%N)
  "$PY" -c "print(round($e - $s, 3))"
}
settle() {  # after a cold run the services boot (CPU-heavy Python): wait until they listen
  for pid in $G1 $G2; do
    for _ in $(seq 120); do
      n=$(nsenter -t "$pid" -a -- ss -Htln 2>/dev/null | grep -cE '127\.0\.0\.1:(8888|6006) ' || true)
      [ "$n" -ge 2 ] && break
      sleep 0.5
    done
  done
  sleep 2
}
median() { "$PY" -c 'import statistics,sys; print(round(statistics.median(map(float, sys.argv[1:])), 3))' "$@"; }

PROVISION_CMD=("$PROV" apply -i "$INV" --yes --playbook "$OUT/peers/playbook.yml")
PYINFRA_CMD=("$PEERS/bin/pyinfra" -y inventory.py deploy.py)
ANSIBLE_CMD=("$PEERS/bin/ansible-playbook" -i hosts.ini site.yml)

declare -A R
measure() {  # name scenario command...
  local name=$1 scenario=$2; shift 2
  local times=()
  for _ in $(seq "$RUNS"); do
    if [ "$scenario" = cold ]; then reset_hosts; fi
    times+=("$(t_run "$@")")
  done
  R[$name.$scenario]=$(median "${times[@]}")
  echo "  $name $scenario: ${times[*]} -> median ${R[$name.$scenario]} s" >&2
}

echo "lab $PROVISION_LAB_NAME, $RUNS runs each, median seconds (wall clock, process start to exit)" >&2
reset_hosts
for tool in provision pyinfra ansible; do
  case $tool in
    provision) cmd=("${PROVISION_CMD[@]}"); one=(gpu1) ;;
    pyinfra) cmd=("${PYINFRA_CMD[@]}"); one=(--limit gpu1) ;;
    ansible) cmd=("${ANSIBLE_CMD[@]}"); one=(--limit gpu1) ;;
  esac
  measure "$tool" cold "${cmd[@]}"
  settle
  t_run "${cmd[@]}" >/dev/null  # warm-up, not counted
  measure "$tool" noop2 "${cmd[@]}"
  measure "$tool" noop1 "${cmd[@]}" "${one[@]}"
done

"$PY" - "${R[provision.noop1]}" "${R[provision.noop2]}" "${R[provision.cold]}" \
  "${R[pyinfra.noop1]}" "${R[pyinfra.noop2]}" "${R[pyinfra.cold]}" \
  "${R[ansible.noop1]}" "${R[ansible.noop2]}" "${R[ansible.cold]}" <<'PYEOF' | tee "$OUT/summary.txt"
import sys
p1, p2, pc, i1, i2, ic, a1, a2, ac = map(float, sys.argv[1:])
print(f"{'':12}{'no-op 1 host':>14}{'no-op 2 hosts':>15}{'cold 2 hosts':>14}")
for name, a, b, c in (("provision", p1, p2, pc), ("pyinfra", i1, i2, ic), ("ansible", a1, a2, ac)):
    print(f"{name:12}{a:>13.2f}s{b:>14.2f}s{c:>13.2f}s")
def goal(ok): return "met" if ok else "MISSED"
print()
print(f"no-op 1 host: {p1:.2f} s (goal <= 1.0 s: {goal(p1 <= 1.0)})")
print(f"  pyinfra/provision {i1 / p1:.1f}x, ansible/provision {a1 / p1:.1f}x (goal >= 4x: {goal(i1 / p1 >= 4 and a1 / p1 >= 4)})")
print(f"no-op 2 hosts / 1 host: {p2 / p1:.2f}x (goal <= 1.3x: {goal(p2 / p1 <= 1.3)})")
print(f"cold: pyinfra/provision {ic / pc:.1f}x (goal >= 2x: {goal(ic / pc >= 2)}), ansible/provision {ac / pc:.1f}x")
PYEOF
