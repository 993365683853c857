#!/usr/bin/env bash
# The lab half of `make demo` (root): real hosts, real sshd/systemd/iptables/Jupyter.
# lab up -> bootstrap through the bastion -> plan shows nothing to do -> the public model
# API through its door (a certificate from the lab's CA, 200 with a key, 401 without) -> the
# training cluster: one command on every member, a Gloo all-reduce, audit --cluster -> tunnel to
# Jupyter and TensorBoard, fetch both pages -> one Jupyter per person, bob (no sudo) opens
# his own through his tunnel -> a real DNS cutover on BIND driven by the
# inventory (seconds of TTL), checked on ns1 and the resolver, then `dns plan` is empty -> lab down.
set -euo pipefail
cd "$(dirname "$0")/.."
P=$PWD/.venv/bin/provision
export PROVISION_LAB_NAME=${PROVISION_LAB_NAME:-demo}
DIR=/var/lib/provision-lab/$PROVISION_LAB_NAME
INV=$DIR/inventory.yml
step() { printf '\n\033[1;36m== %s\033[0m\n' "$*"; }
cleanup() { step "provision lab down"; $P lab down || true; }
trap cleanup EXIT

step "provision lab up   (bastion, gpu1, gpu2, ns1, resolver: booted systemd-nspawn containers)"
time $P lab up --dir "$DIR"
$P lab status

step "the lab's inventory: $INV"
cat "$INV"
$P check -i "$INV"

step "bootstrap the bastion, then gpu1 and gpu2 through it (users, keys, services, sshd and firewall: commit-confirmed)"
$P lab exec -- "$P" apply -i "$INV" --yes

step "plan again: nothing to do (exit 0 with --detailed-exitcode)"
$P lab exec -- "$P" plan -i "$INV" --detailed-exitcode

GPU1=$("$PWD/.venv/bin/python" -c "import yaml,sys; print(yaml.safe_load(open(sys.argv[1]))['hosts']['gpu1']['address'])" "$INV")
NAME=model.lab.test
ON_BASTION() { $P lab exec -- ssh -F "$DIR/ssh_config" -o BatchMode=yes bastion "$@"; }
step "the public model API on gpu1, from the bastion (the internet): HTTPS on 443 with a certificate from the lab's CA (Pebble, DNS-01 through the lab's zone)"
ON_BASTION "openssl s_client -connect $GPU1:443 -servername $NAME </dev/null 2>/dev/null | openssl x509 -noout -subject -issuer -enddate"
step "a request with alice's key (HTTP/2, 200), then one without (401, JSON)"
KEY=$(cat "$DIR/api-keys/alice")
ON_BASTION "curl -sk --http2 --resolve $NAME:443:$GPU1 -H 'Authorization: Bearer $KEY' -o /dev/null -w 'with a key: HTTP/%{http_version} %{http_code}\n' https://$NAME/"
ON_BASTION "curl -sk --resolve $NAME:443:$GPU1 -w '\nwithout: %{http_code}\n' https://$NAME/"

step "the training cluster 'train' (gpu1, gpu2): one command on every member, each with its rank and interface"
$P lab exec -- "$P" exec cluster:train -i "$INV" -- 'echo rank $NODE_RANK of $NNODES, rendezvous $MASTER_ADDR:$MASTER_PORT, Gloo on $GLOO_SOCKET_IFNAME, ports $(tr "\\t" - </proc/sys/net/ipv4/ip_local_port_range)'
step "a real Gloo all-reduce (Debian's python3-torch) between the members, through the hardened firewall"
$P lab exec -- "$P" exec cluster:train -i "$INV" --timeout 120 -- 'python3 -c "
import os, torch, torch.distributed as d
d.init_process_group(\"gloo\", init_method=\"tcp://%s:%s\" % (os.environ[\"MASTER_ADDR\"], os.environ[\"MASTER_PORT\"]), rank=int(os.environ[\"NODE_RANK\"]), world_size=int(os.environ[\"NNODES\"]))
t = torch.tensor([float(d.get_rank() + 1)]); d.all_reduce(t); print(\"rank\", d.get_rank(), \"sum\", t.item())"'
step "provision audit --cluster train: every pair open (RTT, Gb/s), the bastion shut out"
$P lab exec -- "$P" audit --cluster train -i "$INV" --seconds 1

step "provision tunnel gpu1: Jupyter and TensorBoard on 127.0.0.1, pages fetched through the tunnel"
$P lab exec -- "$P" tunnel -i "$INV" gpu1 --check

TEAMINV=$DIR/inventory-team.yml
if "$PWD/.venv/bin/python" - "$INV" "$TEAMINV" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
if "venv" not in doc["roles"]["gpu-server"]["services"]["jupyter"]:
    sys.exit(1)  # no Jupyter in this machine's venv: the lab serves a plain page instead
doc["hosts"]["gpu1"]["services"] = {"jupyter": {"per_user": True}}  # over the role's
yaml.safe_dump(doc, open(sys.argv[2], "w"))
PY
then
  step "one Jupyter per person on gpu1 (jupyter: {per_user: true}): alice's and bob's, each run as them, each with a token made on the host"
  $P lab exec -- "$P" apply -i "$TEAMINV" gpu1 --yes
  step "provision tunnel gpu1 --user bob: bob (no sudo) gets his own Jupyter with his token, read over his own login"
  for i in 1 2 3 4 5 6 7 8 9 10; do  # the servers take a few seconds to listen
    if $P lab exec -- "$P" tunnel -i "$TEAMINV" gpu1 jupyter --user bob --check; then break; fi
    [ "$i" != 10 ] || exit 1
    sleep 2
  done
fi

step "DNS as code on the lab's BIND (RFC 2136 + TSIG): the zone already matches the inventory"
$P lab exec -- "$P" dns plan -i "$INV" --detailed-exitcode
export PROVISION_STATE_DIR=$DIR/state   # the migration journal of this demo
DNSINV=$DIR/inventory-dns.yml
"$PWD/.venv/bin/python" - "$INV" "$DNSINV" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
zone = doc["dns"]["zones"]["lab.test"]
zone["cutover_above_ttl"] = 3      # the demo's TTLs are seconds; the default is 300 s
zone["records"]["app"]["ttl"] = 4
yaml.safe_dump(doc, open(sys.argv[2], "w"))
PY
step "app.lab.test: TTL 300 -> 4 s (a TTL-only change is a plain change; it keeps the demo's waits to seconds)"
$P lab exec -- "$P" dns apply -i "$DNSINV" --yes

"$PWD/.venv/bin/python" - "$DNSINV" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
zone = doc["dns"]["zones"]["lab.test"]
zone["records"]["app"]["values"] = [zone["server"]]   # ns1: TCP 53 answers the health check
yaml.safe_dump(doc, open(sys.argv[1], "w"))
PY
step "move app.lab.test to a new server in the inventory: dns plan calls it a cutover (TTL 4 s > 3 s), dns apply leaves it alone"
$P lab exec -- "$P" dns plan -i "$DNSINV" || true
$P lab exec -- "$P" dns apply -i "$DNSINV" --yes

step "provision dns migrate run app: target from the inventory; lower the TTL, wait out the old one, health-check, switch, verify on ns1 and the resolver, raise the TTL back"
time $P lab exec -- "$P" dns migrate run app -i "$DNSINV" --lower-ttl 1 --health tcp:53

step "provision dns check app: what ns1 (authoritative, RD off) and the resolver answer"
$P lab exec -- "$P" dns check app -i "$DNSINV" \
  || echo "(a server disagrees: the notes above say which and for how long)"

step "dns plan: no changes (exit 0 with --detailed-exitcode): the zone is what the inventory says"
$P lab exec -- "$P" dns plan -i "$DNSINV" --detailed-exitcode
