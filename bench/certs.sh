#!/usr/bin/env bash
# Certificate issuance against the lab's Pebble over RFC 2136 (the lab's BIND):
#   provision: `certs renew gpu1 --force`, from the command's start to port 443 on gpu1
#              serving the new certificate (SSH, CSR read, CAA, order, TXT, every
#              authoritative server, answer, finalize, install, reload, read-back);
#   lego:      `lego run` with its rfc2136 provider on the same Pebble and zone (issuance
#              only: lego writes files on this machine, installs nothing).
# Root needed; a running lab ($PROVISION_LAB_NAME, `provision lab up`). gpu1's door is the
# real one, applied by `provision apply` as tests/lab/test_certs.py does (the lab's model
# API under api.lab.test), and put back as the lab declares it at the end.
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

# the inventories: gpu1 alone (no roles) with the lab's model API behind its door, under
# api.lab.test for the bench, and as the lab declares it (to put back at the end)
$PY - "$DIR/inventory.yml" "$WORK" <<'PYEOF'
import copy, sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
doc.pop("roles", None)
doc.pop("clusters", None)
doc["hosts"] = {"gpu1": {k: v for k, v in doc["hosts"]["gpu1"].items() if k != "roles"}}
open(f"{sys.argv[2]}/lab-gpu1.yml", "w").write(yaml.safe_dump(doc))
bench = copy.deepcopy(doc)
bench["hosts"]["gpu1"]["services"]["model-api"]["https"]["name"] = "api.lab.test"
open(f"{sys.argv[2]}/inventory.yml", "w").write(yaml.safe_dump(bench))
PYEOF
mkdir -m 700 "$WORK/state"
export PROVISION_STATE_DIR=$WORK/state XDG_CONFIG_HOME=$WORK/xdg
mkdir -p "$XDG_CONFIG_HOME" && ln -s "$DIR" "$XDG_CONFIG_HOME/provision"
apply() { ip netns exec "$OP" .venv/bin/provision apply --yes -i "$1" gpu1 >/dev/null 2>&1; }
trap 'apply "$WORK/lab-gpu1.yml" || echo "gpu1: putting the lab door back failed" >&2; rm -rf "$WORK"' EXIT
run() { ip netns exec "$OP" .venv/bin/provision certs renew gpu1 -i "$WORK/inventory.yml" "$@" >/dev/null 2>&1; }
apply "$WORK/inventory.yml"   # the door, and its first certificate (the account, the key on gpu1)

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
