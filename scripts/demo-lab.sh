#!/usr/bin/env bash
# The lab half of `make demo` (root): real hosts, real sshd/systemd/iptables/Jupyter.
# lab up -> bootstrap through the bastion -> plan shows nothing to do -> tunnel to
# Jupyter and TensorBoard, fetch both pages -> move a DNS record on BIND, check it on ns1
# and the resolver -> lab down.
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

step "provision tunnel gpu1: Jupyter and TensorBoard on 127.0.0.1, pages fetched through the tunnel"
$P lab exec -- "$P" tunnel -i "$INV" gpu1 --check

step "DNS as code on the lab's BIND (RFC 2136 + TSIG): the zone already matches the inventory"
$P lab exec -- "$P" dns plan -i "$INV" --detailed-exitcode
DNSINV=$DIR/inventory-dns.yml
"$PWD/.venv/bin/python" - "$INV" "$DNSINV" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
app = doc["dns"]["zones"]["lab.test"]["records"]["app"]
app["values"] = [app["values"][0].rsplit(".", 1)[0] + ".201"]
app["ttl"] = 60
yaml.safe_dump(doc, open(sys.argv[2], "w"))
PY
step "move app.lab.test in the inventory: plan, apply (one atomic UPDATE, waits until ns1 serves it)"
$P lab exec -- "$P" dns plan -i "$DNSINV"
$P lab exec -- "$P" dns apply -i "$DNSINV" --yes

step "provision dns check app: what ns1 (authoritative, RD off) and the resolver answer"
$P lab exec -- "$P" dns check app -i "$DNSINV" \
  || echo "(a server disagrees: the notes above say which and for how long)"
