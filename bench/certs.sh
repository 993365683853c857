#!/usr/bin/env bash
# Certificate issuance against the lab's Pebble over RFC 2136 (the lab's BIND):
#   provision: `certs renew gpu1 --force`, from the command's start to port 443 on gpu1
#              serving the new certificate (SSH, CSR read, CAA, order, TXT, every
#              authoritative server, answer, finalize, install, reload, read-back);
#   lego:      `lego run` with its rfc2136 provider on the same Pebble and zone (issuance
#              only: lego writes files on this machine, installs nothing).
# Root needed; a running lab ($PROVISION_LAB_NAME, `provision lab up`). gpu1 gets a
# stand-in door (HAProxy) as tests/lab/test_certs.py makes.
# Usage: PROVISION_LAB_NAME=NAME bench/certs.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
: "${PROVISION_LAB_NAME:?name a running lab}"
DIR=/var/lib/provision-lab/$PROVISION_LAB_NAME
OP=plab-$PROVISION_LAB_NAME-op
PY=.venv/bin/python
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
NS1=$(sed -n 's|.*ca: https://\([0-9.]*\):14000/dir|\1|p' "$DIR/inventory.yml")

# the inventory: gpu1 with a public service behind a door on api.lab.test
$PY - "$DIR/inventory.yml" "$WORK/inventory.yml" <<'PYEOF'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
g = doc["hosts"]["gpu1"]
doc["hosts"] = {"gpu1": {"address": g["address"], "via": "bastion", "services": {"api": {
    "port": 8000, "bind": "127.0.0.1", "expose": {"from": ["10.0.0.0/8"]},
    "command": "/usr/bin/python3 -m http.server --bind {bind} {port}",
    "https": {"name": "api.lab.test"}}}}}
doc.pop("roles", None)
open(sys.argv[2], "w").write(yaml.safe_dump(doc))
PYEOF
mkdir -m 700 "$WORK/state"
export PROVISION_STATE_DIR=$WORK/state XDG_CONFIG_HOME=$WORK/xdg
mkdir -p "$XDG_CONFIG_HOME" && ln -s "$DIR" "$XDG_CONFIG_HOME/provision"
run() { ip netns exec "$OP" .venv/bin/provision certs renew gpu1 -i "$WORK/inventory.yml" "$@" >/dev/null 2>&1; }
run || true   # the first certificate (the account, the key on gpu1)
$PY - "$PROVISION_LAB_NAME" < bench/certs_door.py  # stdin: bench/dns.py would shadow dnspython

now() { date +%s.%N; }
ours=(); lego=()
SECRET=$(sed -n 's/.*secret "\(.*\)";/\1/p' "$DIR/tsig.key")
for i in $(seq 1 "$ROUNDS"); do
  t0=$(now); run --force; t1=$(now)
  ours+=("$(printf '%.2f' "$(echo "$t1 - $t0" | bc)")")
  rm -rf "$WORK/lego"
  t0=$(now)
  ip netns exec "$OP" env LEGO_CA_CERTIFICATES="$DIR/pebble-listener.pem" \
    RFC2136_NAMESERVER="$NS1" RFC2136_TSIG_KEY=lab-tsig RFC2136_TSIG_SECRET="$SECRET" \
    RFC2136_TSIG_ALGORITHM=hmac-sha256. RFC2136_POLLING_INTERVAL=1 \
    lego --path "$WORK/lego" --server "https://$NS1:14000/dir" --accept-tos \
      --email bench@lab.test --dns rfc2136 --dns.resolvers "$NS1:53" \
      --domains "lego$i.lab.test" run >"$WORK/lego.log" 2>&1 || { cat "$WORK/lego.log"; exit 1; }
  t1=$(now)
  lego+=("$(printf '%.2f' "$(echo "$t1 - $t0" | bc)")")
done
printf 'provision certs renew --force (to port 443 serving it): %s s\n' "${ours[*]}"
printf 'lego run --dns rfc2136 (issuance only, files here):    %s s\n' "${lego[*]}"
