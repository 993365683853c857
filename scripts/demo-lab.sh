#!/usr/bin/env bash
# The lab half of `make demo` (root): real hosts, real sshd/systemd/iptables/Jupyter.
# lab up -> bootstrap through the bastion -> plan shows nothing to do -> tunnel to
# Jupyter and TensorBoard, fetch both pages -> lab down.
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
