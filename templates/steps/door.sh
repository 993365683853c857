# The door (provision.steps.door): certificates made on the host when missing, the key
# maps and the config written beside the live ones, the config checked by HAProxy before
# it replaces the live one, then a reload (a refused config, or a worker that cannot bind,
# leaves the old one serving) and a read-back of what each port serves.

# provision_door_cert NAME: a private key made here (never leaves the host), a request for
# `provision certs`, and until a CA's certificate is installed a self-signed one
# (every command is checked: the batch may call this where `set -e` is off)
provision_door_cert() {
  pc_d=/etc/provision/tls/$1
  provision_safe_path "$pc_d" || return 1
  mkdir -p /etc/provision/tls && chmod 0755 /etc/provision /etc/provision/tls || return 1
  (umask 077; mkdir -p "$pc_d") && chown root:root "$pc_d" && chmod 0700 "$pc_d" || return 1
  if [ ! -s "$pc_d/privkey.pem" ]; then
    (umask 077; openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
       -out "$pc_d/privkey.pem.new" 2>/dev/null) && mv -f "$pc_d/privkey.pem.new" "$pc_d/privkey.pem" \
      && rm -f "$pc_d/fullchain.pem" "$pc_d/haproxy.pem" "$pc_d/request.csr" \
      || { echo "door: could not make a key for $1" >&2; return 1; }
  fi
  if [ ! -s "$pc_d/request.csr" ]; then
    openssl req -new -key "$pc_d/privkey.pem" -subj "/CN=$1" -addext "subjectAltName=DNS:$1" \
      -out "$pc_d/request.csr.new" 2>/dev/null && mv -f "$pc_d/request.csr.new" "$pc_d/request.csr" \
      || { echo "door: could not make a request for $1" >&2; return 1; }
  fi
  if [ ! -s "$pc_d/fullchain.pem" ]; then
    openssl req -x509 -key "$pc_d/privkey.pem" -subj "/CN=$1" -addext "subjectAltName=DNS:$1" \
      -days 90 -out "$pc_d/fullchain.pem.new" 2>/dev/null \
      && mv -f "$pc_d/fullchain.pem.new" "$pc_d/fullchain.pem" && : > "$pc_d/self-signed" \
      || { echo "door: could not make a self-signed certificate for $1" >&2; return 1; }
  fi
  if [ ! -s "$pc_d/haproxy.pem" ]; then
    (umask 077; cat "$pc_d/fullchain.pem" "$pc_d/privkey.pem" > "$pc_d/haproxy.pem.new") \
      && mv -f "$pc_d/haproxy.pem.new" "$pc_d/haproxy.pem" || return 1
  fi
  chmod 0600 "$pc_d/privkey.pem" "$pc_d/haproxy.pem" && chmod 0644 "$pc_d/fullchain.pem" "$pc_d/request.csr"
}

# provision_door_port_free PORT: nothing but the door listens on PORT
provision_door_port_free() {
  pp_pids=$(ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | sort -u)
  for pp_p in $pp_pids; do
    if ! grep -q 'provision-door\.service' "/proc/$pp_p/cgroup" 2>/dev/null; then
      pp_c=$(cat "/proc/$pp_p/comm" 2>/dev/null || echo '?')
      pp_u=$(sed -n 's|^0::.*/\([^/]*\.service\)$|\1|p' "/proc/$pp_p/cgroup" 2>/dev/null)
      echo "door: port $1 is taken by $pp_c (pid $pp_p${pp_u:+, $pp_u}), not the door: stop it or give https.port another port; the door was not changed" >&2
      return 1
    fi
  done
}

# provision_door_apply DIGEST UNIT_CHANGED PORTS: check the written candidate, put it in
# place, start or reload, and read back that every port serves DIGEST
provision_door_apply() {
  pa_cfg=/etc/provision/door/haproxy.cfg
  for pa_p in $3; do provision_door_port_free "$pa_p" || { rm -f "$pa_cfg.new"; return 1; }; done
  if ! pa_out=$(haproxy -c -q -f "$pa_cfg.new" 2>&1); then
    rm -f "$pa_cfg.new"
    printf 'door: HAProxy refused the new config; the old one keeps serving:\n%s\n' "$pa_out" >&2
    return 1
  fi
  mv -f "$pa_cfg.new" "$pa_cfg" || return 1
  if [ "$2" = 1 ]; then systemctl daemon-reload || return 1; fi
  systemctl enable -q provision-door.service || return 1
  # a failed reload or start is reported by the read-back below (what the port serves)
  if systemctl is-active -q provision-door.service; then
    systemctl reload provision-door.service || true
  else
    systemctl restart provision-door.service || true
  fi
  for pa_p in $3; do
    pa_i=0
    while :; do
      pa_got=$(curl -sk -m 3 -o /dev/null -D - "https://127.0.0.1:$pa_p/" 2>/dev/null \
               | tr -d '\r' | sed -n 's/^[Xx]-[Pp]rovision-[Dd]oor: *//p' | head -n 1)
      [ "$pa_got" = "$1" ] && break
      pa_i=$((pa_i + 1))
      if [ "$pa_i" -ge 50 ]; then
        echo "door: port $pa_p serves config ${pa_got:-nothing} after the reload, not $1 (journalctl -u provision-door)" >&2
        journalctl -u provision-door.service -n 5 --no-pager -o cat >&2 || true
        return 1
      fi
      sleep 0.1
    done
  done
}
