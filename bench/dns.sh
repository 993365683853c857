#!/usr/bin/env bash
# DNS benchmark (not a test): `bench/dns.py` — a 5,000-record plan on each provider (moto
# and the local Cloud DNS server on 127.0.0.1; lab BIND when root) and apply of one change
# on lab BIND until every authoritative server serves it.
# Usage: bench/dns.sh   (PROVISION_LAB_NAME picks the lab, default bench-dns; brought up
#        and down here when not already running; without root the lab part is skipped)
set -euo pipefail
cd "$(dirname "$0")/.."
export PROVISION_LAB_NAME=${PROVISION_LAB_NAME:-bench-dns}
PY=$PWD/.venv/bin/python
PROV=$PWD/.venv/bin/provision
if [ "$(id -u)" != 0 ]; then
  exec "$PY" bench/dns.py
fi
up=$("$PROV" lab status --json 2>/dev/null | "$PY" -c 'import json,sys; print(json.load(sys.stdin).get("up", False))' 2>/dev/null || echo False)
STARTED_LAB=0
if [ "$up" != "True" ]; then
  "$PROV" lab up --gpus 1 >/dev/null
  STARTED_LAB=1
fi
cleanup() { if [ "$STARTED_LAB" = 1 ]; then "$PROV" lab down >/dev/null || true; fi; }
trap cleanup EXIT
"$PY" bench/dns.py --lab "$PROVISION_LAB_NAME"
