#!/usr/bin/env bash
# Converge benchmark (not a test): provision vs pyinfra vs ansible-core doing the same work
# (team users, keys, sudoers, unit files, data dirs, enable+start) on 1, 8 and 32 of the lab's
# GPU hosts through the same bastion, as the same non-root login user with sudo.
#   for each fleet size: a cold run (hosts reset first) and a no-op run
# The service is a stand-in (python3 -m http.server on 127.0.0.1:8888), the same for every
# tool: 32 real Jupyter servers starting at once would measure this machine's CPU, not the tools.
# Goals (reported, not asserted): no-op at 8 hosts <= 1.3x the 1-host time, at 32 <= 2x;
# at 32 hosts >= 5x faster than pyinfra and Ansible.
# Usage: bench/converge.sh   (root; PROVISION_LAB_NAME picks the lab, default bench-conv;
#        SIZES="1 8 32"; TOOLS="provision pyinfra ansible"; RUNS=N repetitions (default 3;
#        provision at every size, the peers for sizes <= 8), RUNS_LARGE for the peers at the
#        larger ones (default 1); median reported; the plot goes to docs/figures/)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PROVISION_LAB_NAME=${PROVISION_LAB_NAME:-bench-conv}
SIZES=${SIZES:-"1 8 32"}
RUNS=${RUNS:-3}
RUNS_LARGE=${RUNS_LARGE:-1}
TOOLS=${TOOLS:-"provision pyinfra ansible"}
OUT=$ROOT/bench/results/converge
FIG=${FIG:-$ROOT/docs/figures/converge-fleet.png}
MAX=0; for n in $SIZES; do [ "$n" -gt "$MAX" ] && MAX=$n; done

source bench/lib.sh
ensure_peers pyinfra=pyinfra ansible=ansible-core matplotlib=matplotlib
ensure_lab "$MAX"
# A lab this script did not bring up is left as reset_hosts leaves it: without the stand-in
# service on port 8888, where the lab inventory's Jupyter (bench/floor.sh applies it) would
# otherwise fail to bind and restart every 5 s at a full core, skewing every later figure.
cleanup() {
  if [ "$STARTED_LAB" = 1 ]; then "$PROV" lab down >/dev/null || true
  elif [ "${#LEADER[@]}" -gt 0 ]; then reset_hosts "$MAX" || true; fi
}
declare -A LEADER=()
trap cleanup EXIT

# the stand-in service on every GPU host
lab_inventory '{"notebook": {"port": 8888, "command": "/usr/bin/python3 -m http.server --bind {bind} {port}"}}'
for i in $(seq "$MAX"); do
  LEADER[$i]=$("$PY" -c "import os,sys; from provision.lab.state import read_state, container_leader; print(container_leader(read_state(os.environ['PROVISION_LAB_NAME'])['pids'][sys.argv[1]]))" "gpu$i")
done

"$PY" bench/converge_peers.py "$INV" "$OUT/peers"
sed -i "s/^forks = .*/forks = $MAX/" "$OUT/peers/ansible.cfg"  # as many at once as provision
cd "$OUT/peers"
export ANSIBLE_CONFIG=$OUT/peers/ansible.cfg ANSIBLE_NOCOLOR=1

reset_hosts() {  # undo everything the bootstrap does, on hosts 1..N (in parallel)
  for i in $(seq "$1"); do
    nsenter -t "${LEADER[$i]}" -a -- sh -c '
      for u in /etc/systemd/system/provision-*.service; do
        [ -e "$u" ] || continue
        case $u in *provision-firewall*) continue;; esac
        systemctl disable --now "$(basename "$u")" >/dev/null 2>&1 || true; rm -f "$u"
      done
      systemctl daemon-reload
      rm -rf /etc/provision/jupyter /srv/runs /etc/sudoers.d/provision-*
      for u in alice bob; do userdel -r "$u" >/dev/null 2>&1 || true; done' &
  done
  wait
}

FAILS=$OUT/failures.txt
settle() {  # after a cold run: wait until every stand-in listens
  for i in $(seq "$1"); do
    for _ in $(seq 120); do
      nsenter -t "${LEADER[$i]}" -a -- ss -Htln 2>/dev/null | grep -qE '127\.0\.0\.1:8888 ' && break
      sleep 0.25
    done
  done
}

declare -A R
measure() {  # tool scenario size command...
  local name=$1 scenario=$2 n=$3; shift 3
  local times=() runs=$RUNS
  # provision's runs take seconds: its median is of RUNS at every size
  [ "$n" -gt 8 ] && [ "$name" != provision ] && runs=$RUNS_LARGE
  for _ in $(seq "$runs"); do
    if [ "$scenario" = cold ]; then reset_hosts "$n"; fi
    times+=("$(TAG=$name-$scenario-$n t_run "$@")")
  done
  R[$name.$scenario.$n]=$(median "${times[@]}")
  echo "  $name $scenario $n: ${times[*]} -> median ${R[$name.$scenario.$n]} s" >&2
}

echo "lab $PROVISION_LAB_NAME, sizes $SIZES, median seconds (wall clock, process start to exit); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
reset_hosts "$MAX"
for n in $SIZES; do
  names=(); for i in $(seq "$n"); do names+=("gpu$i"); done
  pyinfra_limit=(); for h in "${names[@]}"; do pyinfra_limit+=(--limit "$h"); done
  for tool in $TOOLS; do
    case $tool in
      provision) cmd=("$PROV" apply -i "$INV" --yes --playbook "$OUT/peers/playbook.yml" "${names[@]}") ;;
      pyinfra) cmd=("$PEERS/bin/pyinfra" -y "${pyinfra_limit[@]}" inventory.py deploy.py) ;;
      ansible) cmd=("$PEERS/bin/ansible-playbook" -i hosts.ini site.yml --limit "$(IFS=,; echo "${names[*]}")") ;;
    esac
    measure "$tool" cold "$n" "${cmd[@]}"
    settle "$n"
    t_run "${cmd[@]}" >/dev/null  # warm-up, not counted
    measure "$tool" noop "$n" "${cmd[@]}"
  done
done

{ echo "{"; first=1
  for k in "${!R[@]}"; do [ $first = 1 ] || echo ","; first=0; printf '"%s": %s' "$k" "${R[$k]}"; done
  echo "}"; } > "$OUT/fleet-new.json"
# merged into earlier results, so SIZES="32" can redo one size
"$PY" - "$OUT/fleet.json" "$OUT/fleet-new.json" "$FAILS" <<'PYEOF'
import json, os, sys
old = json.load(open(sys.argv[1])) if os.path.exists(sys.argv[1]) else {}
new = json.load(open(sys.argv[2]))
old.update(new)
fails = [ln.split(":")[0] for ln in open(sys.argv[3]) if ln.strip()]
remeasured = {k.replace(".", "-") for k in new}
old["failed"] = sorted({f for f in old.get("failed", []) if f not in remeasured} | set(fails))
json.dump(old, open(sys.argv[1], "w"), indent=1, sort_keys=True)
PYEOF
SIZES=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(str(n) for n in sorted({int(k.rsplit(".",1)[1]) for k in d if k.count(".")==2})))' "$OUT/fleet.json")
"$PY" - "$OUT/fleet.json" "$SIZES" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PYEOF' | tee "$OUT/summary.txt"
import json, sys
r = json.load(open(sys.argv[1])); sizes = [int(s) for s in sys.argv[2].split()]
failed = r.get("failed", [])
def t(tool, sc, n): return r[f"{tool}.{sc}.{n}"]
def cell(tool, sc, n):  # a size this tool was not run at (SIZES/TOOLS narrowed a run): "-"
    return f"{r[f'{tool}.{sc}.{n}']:>9.2f}s" if f"{tool}.{sc}.{n}" in r else f"{'-':>10}"
print(f"{'':12}" + "".join(f"{f'no-op {n}':>10}{f'cold {n}':>10}" for n in sizes))
tools = [tool for tool in ("provision", "pyinfra", "ansible") if any(f"{tool}.noop.{n}" in r for n in sizes)]
for tool in tools:  # TOOLS may name fewer than the three
    print(f"{tool:12}" + "".join(cell(tool, "noop", n) + cell(tool, "cold", n) for n in sizes))
def goal(ok): return "met" if ok else "MISSED"
one, big = sizes[0], sizes[-1]
print(f"\nload average at the end: {sys.argv[3]}")
for f in failed:
    print(f"FAILED run (timed anyway, see its log): {f}")
for n, limit in ((8, 1.3), (32, 2.0)):
    if n in sizes:
        x = t("provision", "noop", n) / t("provision", "noop", one)
        print(f"no-op {n} hosts / {one} host: {x:.2f}x (goal <= {limit}x: {goal(x <= limit)})")
for sc in ("noop", "cold"):
    for peer in ("pyinfra", "ansible"):
        if f"{peer}.{sc}.{big}" in r and f"provision.{sc}.{big}" in r:
            x = t(peer, sc, big) / t("provision", sc, big)
            lost = " (it lost hosts: less work)" if f"{peer}-{sc}-{big}" in failed else ""
            print(f"{sc} {big} hosts: {peer}/provision {x:.1f}x (goal >= 5x: {goal(x >= 5)}){lost}")
PYEOF
"$PY" - "$OUT/cpu.txt" <<'PYEOF' | tee -a "$OUT/summary.txt"
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    tag, tool_cpu, machine_cpu = line.split()
    if tag != "run":  # warm-ups are not counted
        runs[tag].append((float(tool_cpu), float(machine_cpu)))
print("\nCPU-seconds per run (median): the tool's own (children included) / the whole machine's")
for tag in sorted(runs, key=lambda t: (t.split("-")[0], t.split("-")[1], int(t.split("-")[2]))):
    tool = statistics.median(x[0] for x in runs[tag])
    machine = statistics.median(x[1] for x in runs[tag])
    print(f"  {tag:<22} {tool:7.2f} / {machine:7.2f}")
PYEOF
mkdir -p "$(dirname "$FIG")"
"$PEERS/bin/python" "$ROOT/bench/plot_converge.py" "$OUT/fleet.json" "$FIG" "$SIZES"
echo "plot: $FIG" >&2
