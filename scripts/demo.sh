#!/usr/bin/env bash
# `make demo`: the main job on the embedded default inventory.
# Offline: validate inventories/example.yml and show what would land on a host.
# As root with systemd-nspawn: the same story on real hosts in the lab.
set -euo pipefail
cd "$(dirname "$0")/.."
P=.venv/bin/provision
INV=inventories/example.yml
OUT=$(mktemp -d /tmp/provision-demo.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
step() { printf '\n\033[1;36m== %s\033[0m\n' "$*"; }

# the example's hosts are not this machine's to log in to: its key files are not looked for
step "provision check --no-local-files -i $INV"
$P check --no-local-files -i "$INV"

step "provision render -i $INV --out $OUT"
$P render -i "$INV" --out "$OUT"

step "what lands on gpu1"
(cd "$OUT/gpu1" && find . -type f | sort)

step "gpu1: sshd hardening drop-in"
cat "$OUT/gpu1/etc/ssh/sshd_config.d/00-provision.conf"

step "gpu1: IPv4 firewall (our own chain; Docker's chains untouched)"
cat "$OUT/gpu1/etc/iptables/rules.v4"

step "gpu1: the Jupyter unit (bound to 127.0.0.1, reached by tunnel)"
cat "$OUT/gpu1/etc/systemd/system/provision-jupyter.service"

step "ssh_config for the team (ProxyJump + LocalForward)"
sed -n '1,40p' "$OUT/ssh_config"

step "provision sg plan: the security groups against a local moto server (127.0.0.1 only, no AWS)"
bash scripts/demo-sg.sh "$INV"

if [[ $(id -u) -eq 0 ]] && command -v systemd-nspawn >/dev/null && [[ -x scripts/demo-lab.sh ]]; then
  bash scripts/demo-lab.sh
else
  step "lab part skipped (needs root and systemd-nspawn; run 'make demo' as root)"
fi
