#!/usr/bin/env bash
# DNS migration benchmark (not a test): `bench/migrate.py` — `provision dns migrate run` on
# the lab's BIND + Unbound, ns1 -> resolver delay after the cutover and the whole run time.
# Usage: bench/migrate.sh   (PROVISION_LAB_NAME picks the lab, default bench-migrate; brought
#        up and down here when not already running; without root it is skipped)
set -euo pipefail
cd "$(dirname "$0")/.."
export PROVISION_LAB_NAME=${PROVISION_LAB_NAME:-bench-migrate}
PY=$PWD/.venv/bin/python
PROV=$PWD/.venv/bin/provision
if [ "$(id -u)" != 0 ]; then
  echo "migrate: needs root and a lab; skipped"
  exit 0
fi
up=$("$PROV" lab status --json 2>/dev/null | "$PY" -c 'import json,sys; print(json.load(sys.stdin).get("up", False))' 2>/dev/null || echo False)
STARTED_LAB=0
if [ "$up" != "True" ]; then
  "$PROV" lab up --gpus 1 >/dev/null
  STARTED_LAB=1
fi
cleanup() { if [ "$STARTED_LAB" = 1 ]; then "$PROV" lab down >/dev/null || true; fi; }
trap cleanup EXIT
"$PY" bench/migrate.py --lab "$PROVISION_LAB_NAME" "$@"
