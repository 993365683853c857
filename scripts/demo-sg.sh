#!/usr/bin/env bash
# The offline security-group step of `make demo`: `provision sg plan` against a moto
# server on 127.0.0.1 (a free port), showing what `sg apply` would create. Dummy keys, no
# profiles, no instance metadata: boto3 can reach nothing but the local server.
set -euo pipefail
cd "$(dirname "$0")/.."
INV=${1:-inventories/example.yml}
TMP=$(mktemp -d /tmp/provision-demo-sg.XXXXXX)
MOTO_PID=""
cleanup() {
  if [[ -n "$MOTO_PID" ]]; then kill "$MOTO_PID" 2>/dev/null || true; wait "$MOTO_PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
.venv/bin/python scripts/moto_local.py > "$TMP/url" 2>/dev/null &
MOTO_PID=$!
for _ in $(seq 100); do [[ -s "$TMP/url" ]] && break; sleep 0.1; done
URL=$(head -1 "$TMP/url")
[[ "$URL" == http://127.0.0.1:* ]] || { echo "moto server did not start" >&2; exit 1; }
local_aws() {
  env -u AWS_PROFILE -u AWS_DEFAULT_PROFILE -u AWS_SESSION_TOKEN \
      AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo AWS_DEFAULT_REGION=us-east-1 \
      AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true \
      AWS_ENDPOINT_URL="$URL" AWS_ENDPOINT_URL_EC2="$URL" "$@"
}
# `sg plan` verifies the VPCs exist: make one in the local server and plan the example's
# groups into it (moto chooses the id, so the inventory is copied with that id)
VPC=$(local_aws .venv/bin/python -c 'import boto3; print(boto3.client("ec2").create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"])')
sed "s/vpc-0abc1234/$VPC/g" "$INV" > "$TMP/inventory.yml"
local_aws .venv/bin/provision sg plan -i "$TMP/inventory.yml"
