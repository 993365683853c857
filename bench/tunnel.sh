#!/usr/bin/env bash
# Tunnel backends side by side, through the same bastion to the same 127.0.0.1 service on
# gpu1 (python http.server serving a 300 MB file from /var/tmp): time until the first byte
# arrives through a freshly started tunnel, and download throughput, for plain
# `ssh -L` with ProxyJump, `provision tunnel --backend openssh` and `--backend paramiko`.
# Root needed (the lab). Usage: bench/tunnel.sh [ROUNDS] [SIZE_MB]
# Lab: $PROVISION_LAB_NAME (default bench-tun-<pid>); a lab that is already up is reused
# and left running, otherwise one is brought up and torn down at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SIZE_MB=${2:-300}
export PROVISION_LAB_NAME=${PROVISION_LAB_NAME:-bench-tun-$$}
PROVISION=${PROVISION:-.venv/bin/provision}
PY=${PY:-.venv/bin/python}
[ "$(id -u)" = 0 ] || { echo "bench/tunnel.sh: root needed" >&2; exit 2; }

OWN_LAB=
DIR=$($PROVISION lab status --json 2>/dev/null | $PY -c 'import json,sys; d=json.load(sys.stdin); print(d["dir"] if d.get("up") else "")' 2>/dev/null || true)
if [ -z "$DIR" ]; then
  DIR=/var/lib/provision-lab/$PROVISION_LAB_NAME
  OWN_LAB=1
  $PROVISION lab up --dir "$DIR" >/dev/null
fi
SSH=(ssh -F "$DIR/ssh_config" -o BatchMode=yes -o ClearAllForwardings=yes)
PORT=9999
WORK=$(mktemp -d /var/tmp/provision-bench-tun.XXXXXX)
cleanup() {
  rm -rf "$WORK"
  if [ -n "$OWN_LAB" ]; then
    $PROVISION lab down >/dev/null 2>&1 || true; rm -rf "$DIR"
  else
    $PROVISION lab exec -- "${SSH[@]}" gpu1 "sudo -n systemctl stop provision-bench-http.service" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

# the service on gpu1: a transient unit, bound to 127.0.0.1 only
$PROVISION lab exec -- "${SSH[@]}" gpu1 "sudo -n sh -c 'set -e; mkdir -p /var/tmp/provision-bench;
  [ \$(stat -c %s /var/tmp/provision-bench/blob 2>/dev/null || echo 0) = $((SIZE_MB * 1048576)) ] ||
    head -c $((SIZE_MB * 1048576)) /dev/urandom > /var/tmp/provision-bench/blob;
  systemctl stop provision-bench-http.service 2>/dev/null || true;
  systemd-run --quiet --unit=provision-bench-http --property=User=admin /usr/bin/python3 -m http.server $PORT --bind 127.0.0.1 --directory /var/tmp/provision-bench'"

# the same inventory plus the bench service, so `provision tunnel` forwards it
$PY - "$DIR/inventory.yml" "$WORK/inventory.yml" "$PORT" <<'PYEOF'
import sys, yaml
src, dst, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
doc = yaml.safe_load(open(src))
doc["hosts"]["gpu1"].setdefault("services", {})["bench-http"] = {
    "port": port, "command": "/usr/bin/python3 -m http.server {port} --bind {bind}"}
yaml.safe_dump(doc, open(dst, "w"), sort_keys=False)
PYEOF

$PROVISION lab exec -- "$PY" bench/tunnel_bench.py --inventory "$WORK/inventory.yml" \
  --ssh-config "$DIR/ssh_config" --port "$PORT" --rounds "$ROUNDS" --size-mb "$SIZE_MB" \
  --provision "$PROVISION"
